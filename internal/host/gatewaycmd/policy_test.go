package gatewaycmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/config"
)

// TestPolicyTest: the default config's examples pass; a failing example
// makes `policy test` exit 1 and name it, in text and in JSON.
func TestPolicyTest(t *testing.T) {
	home := t.TempDir()
	cfgPath := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config.DefaultYAML(home)), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := NewRootCmd()
		root.SetOut(&out)
		root.SetArgs(append([]string{"--home", home, "policy", "test"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	out, err := run()
	if err != nil || !strings.Contains(out, " 0 failed") {
		t.Fatalf("default config: %v\n%s", err, out)
	}

	bad := `agents:
  demo:
    rules:
      - name: no-rm
        deny: 'commands.exists(c, c.name == "rm")'
        reason: no rm
        examples: {match: ["rm x", "echo rm"], not_match: ["ls"]}
`
	if err := os.WriteFile(cfgPath, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run()
	var code cli.ExitCode
	if !errors.As(err, &code) || code != 1 {
		t.Fatalf("failing example: err %v, want exit 1\n%s", err, out)
	}
	if !strings.Contains(out, `FAIL  agents.demo.rules[0].examples.match[1]: no-rm must match "echo rm"`) || !strings.Contains(out, "3 examples, 2 passed, 1 failed") {
		t.Errorf("text output:\n%s", out)
	}
	out, _ = run("--json")
	var rows []struct {
		Field string `json:"field"`
		Pass  bool   `json:"pass"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 3 || rows[1].Pass || rows[1].Field != "agents.demo.rules[0].examples.match[1]" {
		t.Errorf("json output %v:\n%s", err, out)
	}
}

// policy eval takes the agent, tool and arguments as words, as `call`
// does, or as flags; one given both ways, or no agent, is a usage mistake.
func TestPolicyEvalWords(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(config.DefaultYAML(home)), 0o600); err != nil {
		t.Fatal(err)
	}
	rmrf := `{"argv":["rm","-rf","/"]}`
	for _, c := range []struct {
		args []string
		want string // in the output, or the error
	}{
		{[]string{"demo", "exec", rmrf}, "decision: deny by no-recursive-delete"},
		{[]string{"demo", "exec", "--args", rmrf}, "decision: deny by no-recursive-delete"},
		{[]string{"--agent", "demo", "--tool", "exec", "--args", rmrf}, "decision: deny by no-recursive-delete"},
		{[]string{"demo", "exec", `{"argv":["ls"]}`}, "decision: allow by default"},
		{[]string{"demo", "exec", `{"argv":`}, "decision: deny by args.invalid"},
		{[]string{"demo", "--agent", "demo", "--tool", "exec"}, "give the agent once: as a word or with --agent"},
		{[]string{"demo", "exec", "{}", "--args", "{}"}, "give the args once: as a word or with --args"},
		{[]string{"--tool", "exec"}, "which agent? give it as the first word or with --agent"},
		{[]string{"demo", "exec", "{}", "extra"}, `policy eval takes AGENT TOOL [JSON], got ["demo" "exec" "{}" "extra"]`},
	} {
		var out bytes.Buffer
		root := NewRootCmd()
		root.SetOut(&out)
		root.SetArgs(append([]string{"--home", home, "policy", "eval"}, c.args...))
		err := root.Execute()
		if got := out.String() + fmt.Sprint(err); !strings.Contains(got, c.want) {
			t.Errorf("policy eval %q: %q, want %q", c.args, got, c.want)
		}
	}
}

// A word given to a command that takes none says so, not that it is an
// unknown subcommand.
func TestNoArgsSaysWhat(t *testing.T) {
	t.Setenv("TOOLGATE_HOME", t.TempDir())
	for _, path := range [][]string{{"agents"}, {"audit", "tail"}, {"audit", "verify"}, {"policy", "test"}, {"serve"}, {"config", "check"}, {"token", "list"}} {
		var stderr bytes.Buffer
		code := Main(append(path, "stray"), &stderr)
		want := strings.Join(path, " ") + ` takes no arguments, got ["stray"]` + "\nusage: toolgate " + strings.Join(path, " ")
		if code != cli.ExitError || !strings.Contains(stderr.String(), want) {
			t.Errorf("%v: exit %d, stderr %q", path, code, stderr.String())
		}
	}
}

// A command given too few or too many words names the words it takes and
// the ones it got, where cobra said `accepts 2 arg(s), received 1`.
func TestWordsSaysWhat(t *testing.T) {
	t.Setenv("TOOLGATE_HOME", t.TempDir())
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"read"}, `read takes AGENT PATH, got none`},
		{[]string{"read", "demo"}, `read takes AGENT PATH, got ["demo"]`},
		{[]string{"write", "demo", "a", "b"}, `write takes AGENT PATH, got ["demo" "a" "b"]`},
		{[]string{"patch", "demo"}, `patch takes AGENT PATH, got ["demo"]`},
		{[]string{"exec"}, `exec takes AGENT -- ARGV..., got none`},
		{[]string{"run", "demo"}, `run takes AGENT -- ARGV..., got ["demo"]`},
		{[]string{"call", "demo"}, `call takes AGENT TOOL [JSON], got ["demo"]`},
		{[]string{"agent"}, `agent takes AGENT [TASK], got none`},
		{[]string{"agent", "demo", "fix", "it"}, `agent takes AGENT [TASK], got ["demo" "fix" "it"]`},
		{[]string{"secrets", "set"}, `secrets set takes NAME, got none`},
		{[]string{"token", "revoke"}, `token revoke takes ID..., got none`},
		{[]string{"tools", "approve"}, `tools approve takes SERVER.TOOL..., got none`},
		{[]string{"audit", "show", "a", "b"}, `audit show takes [ID], got ["a" "b"]`},
		{[]string{"sandbox", "image", "a", "b"}, `sandbox image takes [TAG], got ["a" "b"]`},
		{[]string{"approvals", "deny"}, `approvals deny takes ID, got none`},
		{[]string{"ingest", "stream-json"}, `ingest stream-json takes FILE, got none`},
	} {
		var stderr bytes.Buffer
		if code := Main(c.argv, &stderr); code != cli.ExitError || !strings.Contains(stderr.String(), c.want+"\nusage: toolgate "+c.argv[0]) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.argv, code, stderr.String(), c.want)
		}
	}
}
