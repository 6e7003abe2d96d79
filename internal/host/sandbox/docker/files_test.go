package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
)

// TestWriteCutShortLeavesFileUnchanged: a write whose stream ends early (a
// gateway that died mid-write, in the content or in the digest trailer
// after it, or that went on past the trailer) or whose bytes do not match
// a digest sent first leaves the old file and no temporary file, on the Engine path and through
// the warm executor alike.
func TestWriteCutShortLeavesFileUnchanged(t *testing.T) {
	spec, sb := newAgent(t)
	waitExecutor(t, sb)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "/workspace/f.txt", []byte("old")); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("new content ", 1000)
	sum := sha256.Sum256([]byte(want))
	first := []string{proto.ClientPath, "put", "/workspace/f.txt", strconv.Itoa(len(want)), hex.EncodeToString(sum[:])}
	after := []string{proto.ClientPath, "put", "/workspace/f.txt", strconv.Itoa(len(want)), proto.PutDigestAfter}
	paths := map[string]func(argv []string, stdin []byte) (int, string, error){
		"engine": func(argv []string, in []byte) (int, string, error) {
			return sb.runEngine(ctx, argv, bytes.NewReader(in), nil, &hostexec.CapWriter{Max: 4096})
		},
		"executor": func(argv []string, in []byte) (int, string, error) {
			return sb.run(ctx, argv, bytes.NewReader(in), nil)
		},
	}
	trailer := string(proto.DigestTrailer(sum))
	for name, run := range paths {
		for _, tc := range []struct {
			argv       []string
			input, err string
		}{
			{first, want[:100], "input ended after 100 of 12000 bytes"},
			{first, strings.ToUpper(want), "does not match its sha256"},
			{after, want[:100], "input ended after 100 of 12000 bytes"},
			{after, want + trailer[:30], "digest trailer is missing"},
			{after, want + trailer + "x", "digest trailer is missing"},
		} {
			code, stderr, err := run(tc.argv, []byte(tc.input))
			if err != nil || code == 0 || !strings.Contains(stderr, tc.err) {
				t.Errorf("%s: exit %d, stderr %q, err %v; want a refusal %q", name, code, stderr, err, tc.err)
			}
			if b, _ := os.ReadFile(filepath.Join(spec.Workspace, "f.txt")); string(b) != "old" {
				t.Errorf("%s: the file became %d bytes", name, len(b))
			}
			if entries, _ := os.ReadDir(spec.Workspace); len(entries) != 1 {
				t.Errorf("%s: a temporary file was left behind: %v", name, entries)
			}
		}
	}
	if err := sb.WriteFile(ctx, "/workspace/f.txt", []byte(want)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(spec.Workspace, "f.txt")); string(b) != want {
		t.Fatalf("a whole write: %d bytes", len(b))
	}
}

// TestWriteServedInExecutor: a streamed write through the warm executor is
// served inside the executor's own process — while its content is still
// coming, no `toolgate-client put` process exists in the sandbox — and a
// stream that ends short there leaves the old file and no temporary file.
func TestWriteServedInExecutor(t *testing.T) {
	spec, sb := newAgent(t)
	waitExecutor(t, sb)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "/workspace/f.txt", []byte("old")); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := sb.WriteFileFrom(ctx, "/workspace/f.txt", pr, 1<<20, nil)
		done <- err
	}()
	if _, err := pw.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	// put's temporary file appears once it runs.
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if entries, _ := os.ReadDir(spec.Workspace); len(entries) == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no temporary file after 30 s")
		}
	}
	code, out, err := sb.run(ctx, []string{"sh", "-c", "cat /proc/[0-9]*/cmdline"}, nil, nil)
	if err != nil || code != 0 || !strings.Contains(out, "executor") {
		t.Fatalf("listing processes: exit %d, %v, %q", code, err, out)
	}
	if strings.Contains(out, "put\x00/workspace/f.txt") {
		t.Errorf("a put process runs: %q", out)
	}
	pw.CloseWithError(errors.New("the client went away"))
	if err := <-done; err == nil {
		t.Fatal("a write cut short succeeded")
	}
	if b, _ := os.ReadFile(filepath.Join(spec.Workspace, "f.txt")); string(b) != "old" {
		t.Errorf("the file became %d bytes", len(b))
	}
	if entries, _ := os.ReadDir(spec.Workspace); len(entries) != 1 {
		t.Errorf("a temporary file was left behind: %v", entries)
	}
}
