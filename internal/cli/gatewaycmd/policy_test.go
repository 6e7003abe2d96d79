package gatewaycmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/config"
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
