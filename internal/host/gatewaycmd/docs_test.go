package gatewaycmd

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/toolgate/toolgate/internal/cli"
)

// docs/cli is what the command tree says: after a change to a command,
// `go generate ./internal/host/gatewaycmd` brings it up to date (CI runs this test).
func TestDocsCurrent(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "docs", "cli")
	pages := cli.Docs(NewRootCmd())
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/cli/%s is not current (run go generate ./internal/host/gatewaycmd): %v", name, err)
		}
	}
	on, err := filepath.Glob(filepath.Join(dir, "toolgate*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	for _, p := range on {
		if _, ok := pages[filepath.Base(p)]; !ok {
			stale = append(stale, filepath.Base(p))
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("docs/cli has pages of no command (run go generate ./internal/host/gatewaycmd): %v", stale)
	}
	if _, ok := pages["toolgate_hooks_install.md"]; !ok {
		t.Errorf("no page for a nested command: %d pages", len(pages))
	}
}

// WriteDocs into a directory holding a page of a removed command and an
// outdated page leaves exactly the current pages.
func TestWriteDocsReplaces(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"toolgate_gone.md": "old", "toolgate.md": "outdated", "README.md": "kept"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := cli.WriteDocs(dir, NewRootCmd()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "toolgate_gone.md")); !os.IsNotExist(err) {
		t.Errorf("stale page kept: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "toolgate.md")); !bytes.Equal(b, cli.Docs(NewRootCmd())["toolgate.md"]) {
		t.Errorf("toolgate.md not rewritten: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "README.md")); string(b) != "kept" {
		t.Errorf("README.md touched: %q", b)
	}
}
