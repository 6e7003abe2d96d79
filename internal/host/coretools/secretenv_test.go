package coretools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/secrets"
)

// secretEnv puts a host secret in the environment of an operator's exec,
// keeps only its name in the audit arguments, and is refused to every
// entry point a sandbox can reach.
func TestExecSecretEnv(t *testing.T) {
	t.Parallel()
	const value = "sk-live-1234567890abcdef"
	store, err := secrets.New(t.TempDir(), map[string]config.Secret{
		"api_key": {Value: value, Agents: []string{testAgent.Name}, Tools: []string{"exec"}},
		"other":   {Value: "not-for-exec-value", Agents: []string{testAgent.Name}, Tools: []string{"git"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, config.Limits{})
	for _, tool := range New(nil, store) {
		h.tools[tool.Name()] = tool
	}
	run := func(via, args string) (*gateway.Call, *gateway.Result, error) {
		call := &gateway.Call{ID: "call-1", Agent: testAgent.Name, Tool: "exec", Args: json.RawMessage(args), Via: via}
		if err := h.tools["exec"].Prepare(call, testAgent); err != nil {
			return call, nil, err
		}
		res, err := h.tools["exec"].Run(context.Background(), call, &gateway.RunEnv{Agent: testAgent, Sandbox: h.sb})
		return call, res, err
	}

	call, res, err := run(gateway.ViaAdmin, `{"argv":["sh","-c","echo \"$KEY|$PLAIN\""],"env":{"PLAIN":"p"},"secretEnv":{"KEY":"api_key"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if out := res.Output.(*ExecOutput).Stdout; out != value+"|p\n" {
		t.Errorf("stdout %q", out)
	}
	audited := string(h.tools["exec"].(gateway.AuditArgs).AuditArgs(call))
	if strings.Contains(audited, value) || !strings.Contains(audited, `"secretEnv":{"KEY":"api_key"}`) {
		t.Errorf("audit args %s", audited)
	}

	for _, c := range []struct{ via, args, want string }{
		{"socket", `{"argv":["true"],"secretEnv":{"KEY":"api_key"}}`, "for the operator's calls on the host"},
		{"mcp", `{"argv":["true"],"secretEnv":{"KEY":"api_key"}}`, "for the operator's calls on the host"},
		{"hook", `{"argv":["true"],"secretEnv":{"KEY":"api_key"}}`, "for the operator's calls on the host"},
		{gateway.ViaAdmin, `{"argv":["true"],"secretEnv":{"KEY":"other"}}`, `secret "other" is not available to agent`},
		{gateway.ViaAdmin, `{"argv":["true"],"secretEnv":{"KEY":"missing"}}`, `secret "missing" is not defined`},
		{gateway.ViaAdmin, `{"argv":["true"],"secretEnv":{"1KEY":"api_key"}}`, "not valid"},
		{gateway.ViaAdmin, `{"argv":["true"],"secretEnv":{"KEY":""}}`, "names no secret"},
		{gateway.ViaAdmin, `{"argv":["true"],"env":{"KEY":"x"},"secretEnv":{"KEY":"api_key"}}`, "in both env and secretEnv"},
		{gateway.ViaAdmin, `{"argv":["true"],"secretEnv":["api_key"]}`, "secretEnv"},
	} {
		_, _, err := run(c.via, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "not-for-exec-value") {
			t.Errorf("via %s %s: %v, want %q", c.via, c.args, err, c.want)
		}
	}
}
