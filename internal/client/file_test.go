package client

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/sandbox"
)

func TestPutGet(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", `it's "odd"`+"\n$(x).txt")
	if err := put(p, strings.NewReader("hello\nworld\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := put(p, strings.NewReader("replaced")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := get(p, 4, &out); err != nil {
		t.Fatal(err)
	}
	line, data, _ := bytes.Cut(out.Bytes(), []byte("\n"))
	var h sandbox.FileHeader
	if err := json.Unmarshal(line, &h); err != nil || h.Size != 8 || h.Mode != 0o600 || string(data) != "repl" {
		t.Fatalf("get: header %s (%v), data %q", line, err, data)
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Fatalf("a temporary file was left behind: %v", entries)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"get a directory", get(dir, -1, &out), "is a directory"},
		{"get missing", get(filepath.Join(dir, "nope"), -1, &out), "no such file"},
		{"put over a directory", put(dir, strings.NewReader("x")), "is a directory"},
		{"put under a file", put(filepath.Join(p, "x"), strings.NewReader("x")), "not a directory"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, c.err, c.want)
		}
	}
}
