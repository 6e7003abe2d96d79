package hooks

import (
	"encoding/json"
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
