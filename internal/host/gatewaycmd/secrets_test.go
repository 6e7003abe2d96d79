package gatewaycmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/secrets"
)

// toolgate secrets set: a key file is stored 0600 and usable; a missing or
// world-readable key file is refused with the reason, and nothing stored.
func TestSecretsSet(t *testing.T) {
	home := t.TempDir()
	key := filepath.Join(home, "key.txt")
	if err := os.WriteFile(key, []byte("sk-ant-from-file-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := Main([]string{"--home", home, "secrets", "set", "anthropic_key", "--from", key}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	s, err := secrets.Load(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Resolve("demo", "anthropic", "anthropic_key"); err != nil || v != "sk-ant-from-file-1" {
		t.Fatalf("stored %q %v", v, err)
	}
	for _, c := range []struct {
		name, file, want string
		mode             os.FileMode
	}{
		{"missing", filepath.Join(home, "nope.txt"), "no such file", 0},
		{"0644", filepath.Join(home, "open.txt"), "mode 0644 lets other users read the key", 0o644},
	} {
		if c.mode != 0 {
			os.WriteFile(c.file, []byte("sk-open-key-2"), c.mode)
			os.Chmod(c.file, c.mode)
		}
		stderr.Reset()
		if code := Main([]string{"--home", home, "secrets", "set", "other", "--from", c.file}, &stderr); code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, stderr %q", c.name, code, stderr.String())
		}
	}
	if s, _ := secrets.Load(home, nil); s.Has("other") {
		t.Error("a refused key was stored")
	}
}
