package hostexec_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv"
)

// clientRunner runs the real toolgate-client binary on this host as a
// backend's runner would run it in a sandbox; rewrite, if set, changes its
// argv first (to stand for another version of the client).
func clientRunner(t *testing.T, rewrite func([]string) []string) hostexec.Runner {
	_, clientBin := testenv.Binaries(t)
	return func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) (int, string, error) {
		if rewrite != nil {
			argv = rewrite(argv)
		}
		cmd := exec.CommandContext(ctx, clientBin, argv[1:]...)
		var stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stderr.String(), nil
		}
		return 0, stderr.String(), err
	}
}

// TestWriteFileFromDigestAfter: a streamed write with no digest stated is
// hashed by the gateway on its way, returned, and sent after the content
// for put to check; with a digest stated, that one goes first and is
// checked on both sides. Content shorter or longer than stated, a stated
// digest the bytes do not have, or a content stream that breaks leaves the
// old file and no temporary one, each with its own error.
func TestWriteFileFromDigestAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	run := clientRunner(t, nil)
	dir := t.TempDir()
	p := filepath.Join(dir, "f.bin")
	if err := hostexec.WriteFile(ctx, run, p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	content := make([]byte, 3<<20+11) // several of the hasher's buffers
	for i := range content {
		content[i] = byte(i * 7)
	}
	sum := sha256.Sum256(content)
	wrong := sha256.Sum256(content[1:])
	size := int64(len(content))
	for _, tc := range []struct {
		name string
		body io.Reader
		want *[32]byte
		err  string
	}{
		{"shorter", bytes.NewReader(content[:1<<20]), nil, "the content ended after 1048576 of the 3145739 bytes stated"},
		{"longer", io.MultiReader(bytes.NewReader(content), strings.NewReader("x")), nil, "more content than the 3145739 bytes stated"},
		{"longer, digest stated", io.MultiReader(bytes.NewReader(content), strings.NewReader("x")), &sum, "more content than the 3145739 bytes stated"},
		{"digest mismatch", bytes.NewReader(content), &wrong, "not the " + hex.EncodeToString(wrong[:]) + " stated"},
		{"broken stream", io.MultiReader(bytes.NewReader(content[:2<<20]), iotest.ErrReader(errors.New("connection reset"))), nil, "reading the content: connection reset"},
		{"shorter, digest stated", bytes.NewReader(content[:100]), &sum, "the content ended after 100 of"},
	} {
		got, err := hostexec.WriteFileFrom(ctx, run, p, tc.body, size, tc.want)
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "the file was left as it was") {
			t.Errorf("%s: %v (digest %x), want %q", tc.name, err, got, tc.err)
		}
		if b, _ := os.ReadFile(p); string(b) != "old" {
			t.Errorf("%s: the file became %d bytes", tc.name, len(b))
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%s: a temporary file was left behind: %v", tc.name, entries)
		}
	}
	for _, want := range []*[32]byte{nil, &sum} {
		got, err := hostexec.WriteFileFrom(ctx, run, p, bytes.NewReader(content), size, want)
		if err != nil || got != sum {
			t.Fatalf("stated %v: digest %x, %v", want != nil, got, err)
		}
		if b, _ := os.ReadFile(p); !bytes.Equal(b, content) {
			t.Fatalf("stated %v: the file has %d bytes", want != nil, len(b))
		}
	}
}

// A client older than the digest trailer refuses `put PATH SIZE -` for its
// arguments (it takes the last one for a bad digest, as this client takes
// one that is not hex), before it reads a byte: the write is refused with
// a message that says why, and the file stays. A write with the digest
// stated uses the form every client knows.
func TestWriteFileFromOlderClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	older := clientRunner(t, func(argv []string) []string {
		if argv[len(argv)-1] == proto.PutDigestAfter {
			argv = append(argv[:len(argv)-1:len(argv)-1], "not-a-digest")
		}
		return argv
	})
	p := filepath.Join(t.TempDir(), "f.txt")
	if err := hostexec.WriteFile(ctx, older, p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("new "), 1<<18)
	_, err := hostexec.WriteFileFrom(ctx, older, p, bytes.NewReader(content), int64(len(content)), nil)
	if err == nil || !strings.Contains(err.Error(), "predates this gateway") || !strings.Contains(err.Error(), "bad sha256") {
		t.Errorf("streamed put to an older client: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("the file became %d bytes", len(b))
	}
	sum := sha256.Sum256(content)
	if got, err := hostexec.WriteFileFrom(ctx, older, p, bytes.NewReader(content), int64(len(content)), &sum); err != nil || got != sum {
		t.Fatalf("digest stated: %x, %v", got, err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, content) {
		t.Fatalf("digest stated: the file has %d bytes", len(b))
	}
}
