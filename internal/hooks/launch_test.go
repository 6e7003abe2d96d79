package hooks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/gateway"
)

func TestCheckLaunch(t *testing.T) {
	tests := []struct {
		argv []string
		bad  string
	}{
		{[]string{"claude", "-p", "fix it", "--settings", "/w/s.json"}, ""},
		{[]string{"claude", "--bare", "-p", "x"}, "--bare"},
		{[]string{"/usr/local/bin/claude", "--safe-mode"}, "--safe-mode"},
		{[]string{"env", "A=1", "claude", "--bare=true"}, "--bare"},
		{[]string{"npx", "@anthropic-ai/claude-code", "--bare"}, "--bare"},
		{[]string{"npx", "-y", "@anthropic-ai/claude-code@2.1.328", "--safe-mode"}, "--safe-mode"},
		{[]string{"claude", "-p", "--", "--bare"}, ""}, // after --: the prompt, not a flag
		{[]string{"sh", "-c", "echo --bare"}, ""},
		{[]string{"grep", "--bare", "claude"}, ""},
	}
	for _, tt := range tests {
		err := CheckLaunch(tt.argv)
		if (err != nil) != (tt.bad != "") || err != nil && !strings.Contains(err.Error(), tt.bad) {
			t.Errorf("CheckLaunch(%q) = %v, want refusal %q", tt.argv, err, tt.bad)
		}
	}
}

func TestToolPrepare(t *testing.T) {
	tool := Tool()
	tests := []struct {
		name string
		call gateway.Call
		ok   bool
	}{
		{"mapped Bash", gateway.Call{Via: ViaHook, Tool: "Bash", Command: "ls"}, true},
		{"not from the gate", gateway.Call{Via: "admin", Tool: "Bash", Command: "ls"}, false},
		{"Bash without facts", gateway.Call{Via: ViaHook, Tool: "Bash"}, false},
		{"Write without a path", gateway.Call{Via: ViaHook, Tool: "Write"}, false},
		{"Grep in the cwd", gateway.Call{Via: ViaHook, Tool: "Grep"}, true},
		{"MCP", gateway.Call{Via: ViaHook, Tool: "mcp__s__t"}, true},
	}
	for _, tt := range tests {
		if err := tool.Prepare(&tt.call, gateway.AgentInfo{}); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	aa := tool.(gateway.AuditArgs)
	if got := string(aa.AuditArgs(&gateway.Call{Tool: "Write", Args: []byte(`{"file_path":"/a","content":"secret body"}`)})); strings.Contains(got, "secret") || !strings.Contains(got, `"bytes":11`) {
		t.Errorf("AuditArgs kept the body: %s", got)
	}
}

func TestWithGate(t *testing.T) {
	gate := GateCommand{Command: "/tools/toolgate-client"}
	out, ok, err := WithGate([]string{"env", "X=1", "claude", "-p", "fix it"}, gate)
	if err != nil || !ok || len(out) != 7 || out[2] != "claude" || out[3] != "--settings" || out[5] != "-p" {
		t.Fatalf("WithGate: %q %v %v", out, ok, err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out[4]), &doc); err != nil || doc["hooks"] == nil {
		t.Fatalf("inline settings %q: %v", out[4], err)
	}
	for _, argv := range [][]string{
		{"claude", "-p", "x", "--settings", "/etc/mine.json"},
		{"claude", "--settings=/etc/mine.json"},
		{"python3", "agent.py"},
	} {
		if out, ok, err := WithGate(argv, gate); err != nil || ok || len(out) != len(argv) {
			t.Errorf("WithGate(%q) = %q %v %v, want it unchanged", argv, out, ok, err)
		}
	}
}
