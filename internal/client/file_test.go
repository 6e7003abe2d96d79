package client

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// A FIFO (or any special file) is refused at once: opening one for
// reading would block until a writer appears, holding the gateway's read.
func TestGetFIFODoesNotBlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- get(p, -1, io.Discard) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("get on a fifo: %v", err)
		}
	case <-time.After(3 * time.Second):
		os.WriteFile(p, nil, 0) // unblock the open
		t.Fatal("get blocked opening a fifo")
	}
}
