package guest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

// putAll is put with the size and digest of content, as the gateway sends them.
func putAll(path, content string) error {
	sum := sha256.Sum256([]byte(content))
	return put(path, strings.NewReader(content), int64(len(content)), sum[:])
}

func TestPutGet(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", `it's "odd"`+"\n$(x).txt")
	if err := putAll(p, "hello\nworld\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := putAll(p, "replaced"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := get(p, 4, &out); err != nil {
		t.Fatal(err)
	}
	line, data, _ := bytes.Cut(out.Bytes(), []byte("\n"))
	var h proto.FileHeader
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
		{"put over a directory", putAll(dir, "x"), "is a directory"},
		{"put under a file", putAll(filepath.Join(p, "x"), "x"), "not a directory"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, c.err, c.want)
		}
	}
}

// TestPutOnlyCompleteContent: input that ends before the announced size (a
// gateway that crashed mid-write), runs past it, or does not match the
// digest leaves the target as it was and no temporary file behind.
func TestPutOnlyCompleteContent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	if err := putAll(p, "the old content"); err != nil {
		t.Fatal(err)
	}
	want := "the new content, all of it"
	sum := sha256.Sum256([]byte(want))
	for _, tc := range []struct {
		name, input string
		size        int64
		err         string
	}{
		{"cut short", want[:10], int64(len(want)), "input ended after 10 of 26 bytes"},
		{"empty input", "", int64(len(want)), "input ended after 0 of 26 bytes"},
		{"too long", want + "x", int64(len(want)), "more input than the 26 bytes"},
		{"other content", strings.ToUpper(want), int64(len(want)), "does not match its sha256"},
	} {
		err := put(p, strings.NewReader(tc.input), tc.size, sum[:])
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
		if b, _ := os.ReadFile(p); string(b) != "the old content" {
			t.Errorf("%s: the target became %q", tc.name, b)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%s: a temporary file was left behind: %v", tc.name, entries)
		}
	}
}

// TestPutDigestAfter: with the digest after the content (put PATH SIZE -,
// as the gateway streams a write it hashes on the way), put renames only a
// complete, committed file: exactly SIZE bytes followed by exactly one
// well-formed trailer, the gateway's commit mark. A stream cut in the
// content or in the trailer, a gateway that ended it without a trailer (it
// refused the body), content longer than announced, a malformed trailer or
// anything after it leaves the old file and no temporary file. put does not
// hash the bytes again in this form (the gateway's digest is the record).
func TestPutDigestAfter(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.bin")
	if err := putAll(p, "the old content"); err != nil {
		t.Fatal(err)
	}
	// Over several of put's pieces and a sync_file_range step.
	want := make([]byte, syncBehind+3*putChunk+5)
	for i := range want {
		want[i] = byte(i * 13)
	}
	trailer := proto.DigestTrailer(sha256.Sum256(want))
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name  string
		input []byte
		err   string
	}{
		{"cut in the content", want[:putChunk+7], fmt.Sprintf("input ended after %d of %d bytes", putChunk+7, len(want))},
		{"no trailer", want, "digest trailer is missing"},
		{"cut trailer", cat(want, trailer[:20]), "digest trailer is missing"},
		{"trailer without its newline", cat(want, trailer[:len(trailer)-1]), "digest trailer is missing"},
		{"a trailer of another kind", cat(want, []byte("sha512:"), trailer[7:]), "digest trailer is missing"},
		{"content longer than announced", cat(want, []byte("x"), trailer), "digest trailer is missing"},
		{"more after the trailer", cat(want, trailer, []byte("x")), "digest trailer is missing"},
		{"upper-case digest", cat(want, bytes.ToUpper(trailer)), "digest trailer is missing"},
	} {
		err := put(p, bytes.NewReader(tc.input), int64(len(want)), nil)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
		if b, _ := os.ReadFile(p); string(b) != "the old content" {
			t.Errorf("%s: the target became %d bytes", tc.name, len(b))
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%s: a temporary file was left behind: %v", tc.name, entries)
		}
	}
	if err := put(p, bytes.NewReader(cat(want, trailer)), int64(len(want)), nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, want) {
		t.Fatalf("a whole put wrote %d bytes", len(b))
	}
	empty := proto.DigestTrailer(sha256.Sum256(nil))
	if err := put(p, bytes.NewReader(empty), 0, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Size() != 0 {
		t.Fatalf("an empty put: %v, %v", st, err)
	}
}

// An old gateway's put (digest in argv) and a new one's (digest after) run
// as the commands they are; a put refused for its arguments exits with
// proto.ExitUsage before it reads stdin, as an older client answers "-".
func TestCmdPutForms(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	var stderr strings.Builder
	for _, args := range [][]string{{p, "3"}, {p, "x", proto.PutDigestAfter}, {p, "3", "abcd"}, {p, "-1", proto.PutDigestAfter}} {
		if code := cmdPut(args, &stderr); code != proto.ExitUsage {
			t.Errorf("put %q: exit %d, want %d", args, code, proto.ExitUsage)
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

// get gives the same bytes whatever its output is: a pipe (spliced, as the
// executor's), a file (copied), with and without a limit, over several
// splice pieces.
func TestGetOutputs(t *testing.T) {
	dir := t.TempDir()
	content := make([]byte, 5<<20+123)
	for i := range content {
		content[i] = byte(i * 7)
	}
	p := filepath.Join(dir, "big")
	sum := sha256.Sum256(content)
	if err := put(p, bytes.NewReader(content), int64(len(content)), sum[:]); err != nil {
		t.Fatal(err)
	}
	header := func(b []byte) ([]byte, proto.FileHeader) {
		line, data, _ := bytes.Cut(b, []byte("\n"))
		var h proto.FileHeader
		if err := json.Unmarshal(line, &h); err != nil {
			t.Fatalf("header %q: %v", line, err)
		}
		return data, h
	}
	for _, limit := range []int64{-1, 0, 1, 3<<20 + 5, int64(len(content)) + 10} {
		want := content
		if limit >= 0 && limit < int64(len(want)) {
			want = want[:limit]
		}
		// A pipe, read as the executor reads it.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte)
		go func() { b, _ := io.ReadAll(r); got <- b }()
		err = get(p, limit, w)
		w.Close()
		piped := <-got
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		// A regular file, which splice cannot write.
		f, err := os.Create(filepath.Join(dir, "out"))
		if err != nil {
			t.Fatal(err)
		}
		err = get(p, limit, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		filed, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string][]byte{"pipe": piped, "file": filed} {
			data, h := header(out)
			if h.Size != int64(len(content)) || !bytes.Equal(data, want) {
				t.Errorf("limit %d to a %s: size %d, %d bytes, equal %v", limit, name, h.Size, len(data), bytes.Equal(data, want))
			}
		}
	}
}
