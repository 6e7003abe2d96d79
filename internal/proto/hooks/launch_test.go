package hooks

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
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

func TestDoorOnly(t *testing.T) {
	out, err := DoorOnly([]string{"env", "X=1", "claude", "make the tests pass", "-p"}, "/tools/toolgate-client")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 8 || out[2] != "claude" || out[6] != "make the tests pass" || out[7] != "-p" {
		t.Fatalf("argv %q", out)
	}
	// = forms: claude's list flags are variadic and would take the prompt.
	dis, ok := strings.CutPrefix(out[3], "--disallowedTools=")
	if !ok {
		t.Fatalf("disallowed %q", out[3])
	}
	for _, tool := range []string{"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "Agent"} {
		if !slices.Contains(strings.Split(dis, ","), tool) {
			t.Errorf("%s is not disallowed: %s", tool, dis)
		}
	}
	cfg, ok := strings.CutPrefix(out[4], "--mcp-config=")
	var mc struct {
		MCPServers map[string]struct {
			Type, Command string
			Args          []string
			AlwaysLoad    bool
		} `json:"mcpServers"`
	}
	if !ok || json.Unmarshal([]byte(cfg), &mc) != nil || len(mc.MCPServers) != 1 {
		t.Fatalf("mcp config %q", out[4])
	}
	if s := mc.MCPServers[DoorServer]; s.Type != "stdio" || s.Command != "/tools/toolgate-client" || !slices.Equal(s.Args, []string{"mcp"}) || !s.AlwaysLoad {
		t.Errorf("door server %+v", s)
	}
	if out[5] != "--strict-mcp-config" {
		t.Errorf("not strict: %q", out)
	}
	// The gate still goes in after it.
	gated, ok, err := WithGate(out, GateCommand{Command: "/tools/toolgate-client"})
	if err != nil || !ok || gated[3] != "--settings" {
		t.Errorf("gate after door-only: %v %v %q", ok, err, gated)
	}

	for _, bad := range [][]string{
		{"sh", "-c", "claude -p x"},
		{"python3", "agent.py"},
		{"claude", "--mcp-config", "other.json", "-p", "x"},
		{"claude", "--mcp-config=other.json"},
		{"claude", "--dangerously-skip-permissions", "-p", "x"},
	} {
		if _, err := DoorOnly(bad, "/tools/toolgate-client"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
