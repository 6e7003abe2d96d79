package gatewaycmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
)

// A token for an agent the config does not define is refused before it is
// made; without a config there is nothing to check against.
func TestTokenForUnknownAgent(t *testing.T) {
	home := t.TempDir()
	create := func(agent string) (string, error) {
		var out bytes.Buffer
		root := NewRootCmd()
		root.SetOut(&out)
		root.SetArgs([]string{"--home", home, "token", "create", "--scope", "mcp", "--agent", agent, "--json"})
		err := root.Execute()
		return out.String(), err
	}
	if out, err := create("demo"); err != nil || !strings.Contains(out, `"agent":"demo"`) {
		t.Fatalf("no config: %v %q", err, out)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(config.DefaultYAML(home)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := create("demp"); err == nil || !strings.Contains(err.Error(), `no agent "demp" in `+filepath.Join(home, "config.yaml")+" (there are: demo)") {
		t.Fatalf("misspelt agent: %v", err)
	}
	if out, err := create("demo"); err != nil || !strings.Contains(out, `"agent":"demo"`) {
		t.Fatalf("configured agent: %v %q", err, out)
	}
	var list bytes.Buffer
	root := NewRootCmd()
	root.SetOut(&list)
	root.SetArgs([]string{"--home", home, "token", "list"})
	if err := root.Execute(); err != nil || strings.Count(list.String(), " demo ") != 2 || strings.Contains(list.String(), "demp") {
		t.Fatalf("the refused token was made: %v\n%s", err, list.String())
	}
}
