package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSet(t *testing.T) {
	home := t.TempDir()
	if err := Set(home, "anthropic_key", "sk-ant-one-123", []string{"*"}, []string{"anthropic"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, FileName)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.yaml: %v %v", fi.Mode(), err)
	}
	if err := Set(home, "gh", "ghp_tokenvalue", []string{"demo"}, []string{"gh"}); err != nil {
		t.Fatal(err)
	}
	// Replacing a value keeps its grants when none are given.
	if err := Set(home, "anthropic_key", "sk-ant-two-456", nil, nil); err != nil {
		t.Fatal(err)
	}
	s, err := Load(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Resolve("demo", "anthropic", "anthropic_key"); err != nil || v != "sk-ant-two-456" {
		t.Fatalf("Resolve = %q, %v", v, err)
	}
	if v, err := s.Resolve("demo", "gh", "gh"); err != nil || v != "ghp_tokenvalue" {
		t.Fatalf("Resolve gh = %q, %v", v, err)
	}
	// A secrets.yaml others can read is refused, and left as it was.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Set(home, "x", "value-x-1", nil, nil); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("Set on a 0644 file: %v", err)
	}
	for _, bad := range []struct{ name, value, want string }{
		{"bad name!", "valuevalue", "secret names are"},
		{"short", "abc", "too short"},
	} {
		os.Chmod(path, 0o600)
		if err := Set(home, bad.name, bad.value, nil, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Set(%q): %v", bad.name, err)
		}
	}
}

func TestReadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) *os.File {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	if v, err := ReadKey(write("ok", "sk-key-1\n", 0o600), "ok"); err != nil || v != "sk-key-1" {
		t.Fatalf("ReadKey = %q, %v", v, err)
	}
	if _, err := ReadKey(write("open", "sk-key-1\n", 0o644), "open"); err == nil || !strings.Contains(err.Error(), "mode 0644 lets other users read the key") {
		t.Fatalf("a 0644 key file: %v", err)
	}
	if _, err := ReadKey(write("empty", "\n", 0o600), "empty"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("an empty key: %v", err)
	}
	r, w, _ := os.Pipe()
	w.WriteString("sk-piped-9")
	w.Close()
	if v, err := ReadKey(r, "stdin"); err != nil || v != "sk-piped-9" {
		t.Fatalf("from a pipe: %q %v", v, err)
	}
}
