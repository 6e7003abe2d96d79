package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/adminclient"
)

func TestDefaultHome(t *testing.T) {
	t.Setenv("TOOLGATE_HOME", "/srv/tg")
	if h, err := defaultHome(); err != nil || h != "/srv/tg" {
		t.Errorf("defaultHome() = %q, %v", h, err)
	}
	t.Setenv("TOOLGATE_HOME", "")
	t.Setenv("HOME", "/home/x")
	if h, err := defaultHome(); err != nil || h != "/home/x/.toolgate" {
		t.Errorf("defaultHome() = %q, %v", h, err)
	}
}

// TestDialContext: --context names a gateway by its address and token
// under HOME/contexts; without it the home's daemon is dialled; a context
// that is missing or a path is refused.
func TestDialContext(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ContextsDir, "k8s")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"address": "127.0.0.1:7433\n", adminclient.TokenFile: "tok\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, adminclient.TokenFile), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ context, wantErr string }{
		{"", ""},
		{"k8s", ""},
		{"nope", "context nope"},
		{"../k8s", "a context is a name, not a path"},
		{"..", "a context is a name, not a path"},
	}
	for _, tt := range tests {
		g := &Globals{Home: home, Context: tt.context}
		c, err := g.Dial()
		switch {
		case tt.wantErr == "" && (err != nil || c == nil):
			t.Errorf("context %q: %v", tt.context, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("context %q: %v, want an error naming %q", tt.context, err, tt.wantErr)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "address"), []byte("no port"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Globals{Home: home, Context: "k8s"}).Dial(); err == nil || !strings.Contains(err.Error(), "want host:port") {
		t.Errorf("a bad address: %v", err)
	}
}
