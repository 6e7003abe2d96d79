package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv/probe"
)

func TestDialRefusesPlantedFiles(t *testing.T) {
	t.Parallel()
	uid := os.Getuid()
	victim := filepath.Join(t.TempDir(), "admin.sock")
	accepted := probe.ListenCounting(t, victim)
	tests := []struct {
		name  string
		plant func(dir string) error
		uid   int
		want  string // "" = connects
	}{
		{"real socket", func(dir string) error { probe.ListenCounting(t, filepath.Join(dir, proto.ExecSocketName)); return nil }, uid, ""},
		{"missing", func(string) error { return nil }, uid, "no such file"},
		{"symlink to another socket", func(dir string) error { return os.Symlink(victim, filepath.Join(dir, proto.ExecSocketName)) }, uid, "not a socket"},
		{"symlink to the docker socket", func(dir string) error {
			return os.Symlink("/var/run/docker.sock", filepath.Join(dir, proto.ExecSocketName))
		}, uid, "not a socket"},
		{"fifo", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, proto.ExecSocketName), 0o600) }, uid, "not a socket"},
		{"regular file", func(dir string) error { return os.WriteFile(filepath.Join(dir, proto.ExecSocketName), nil, 0o600) }, uid, "not a socket"},
		{"socket of another user", func(dir string) error { probe.ListenCounting(t, filepath.Join(dir, proto.ExecSocketName)); return nil }, uid + 1, "owned by uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tt.plant(dir); err != nil {
				t.Fatal(err)
			}
			c, err := Dial(context.Background(), dir, tt.uid)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
	// The directory itself must not be a link either.
	link := filepath.Join(t.TempDir(), "exec")
	if err := os.Symlink(filepath.Dir(victim), link); err != nil {
		t.Fatal(err)
	}
	if c, err := Dial(context.Background(), link, uid); err == nil {
		c.Close()
		t.Fatal("followed a symlinked directory")
	}
	if accepted.Load() != 0 {
		t.Fatalf("the victim socket got %d connections", accepted.Load())
	}
}

// BenchmarkOutputFrame: one 32 KiB output frame and its exit frame, read
// as the gateway reads every exec's answer.
//
//	go test ./internal/host/sandbox/hostexec -run '^$' -bench OutputFrame
func BenchmarkOutputFrame(b *testing.B) {
	chunk := bytes.Repeat([]byte{0, 1, 2, 0xff, 'a'}, (32<<10)/5)
	bin := make([]byte, proto.FrameHeaderLen, proto.FrameHeaderLen+len(chunk)+8)
	proto.PutFrameHeader(bin, proto.FrameStdout, len(chunk))
	bin = append(append(bin, chunk...), proto.ExitFrame(proto.ExecExit{})...)
	b.Run("binary", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		r := bytes.NewReader(bin)
		for b.Loop() {
			r.Reset(bin)
			if _, err := proto.ReadExecFrames(r, io.Discard, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestReadFileToChecksBeforeBytes: a streamed read passes the sandbox's
// bytes on only after its header was read and accepted; a refused header, a
// malformed one, or more bytes than the limit fail the read, and a refusal
// is the error the caller sees, not the helper's lost output.
func TestReadFileToChecksBeforeBytes(t *testing.T) {
	t.Parallel()
	answer := func(out string) Runner {
		return func(_ context.Context, _ []string, _ io.Reader, w io.Writer) (int, string, error) {
			for i := 0; i < len(out); i += 3 { // in pieces, as frames come
				if _, err := w.Write([]byte(out[i:min(i+3, len(out))])); err != nil {
					return 0, "", err
				}
			}
			return 0, "", nil
		}
	}
	refuse := errors.New("too big")
	for _, tc := range []struct {
		name, out, want, err string
		limit                int64
		check                func(*gateway.File) error
	}{
		{"ok", `{"size":5,"mode":420}` + "\nhello", "hello", "", -1, nil},
		{"refused", `{"size":5,"mode":420}` + "\nhello", "", "too big", -1, func(*gateway.File) error { return refuse }},
		{"no header", "hello", "", "malformed", -1, nil},
		{"bad header", `{"size":-1}` + "\nhello", "", "malformed", -1, nil},
		{"unknown field", `{"size":5,"x":1}` + "\nhello", "", "malformed", -1, nil},
		{"over limit", `{"size":5,"mode":420}` + "\nhello", "", "more than 4 bytes", 4, nil},
		{"long header", strings.Repeat(" ", 300) + `{"size":5}` + "\nhello", "", "malformed", -1, nil},
	} {
		var out bytes.Buffer
		f, err := ReadFileTo(context.Background(), answer(tc.out), "/workspace/f", tc.limit, tc.check, &out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || (tc.name == "refused" && out.Len() != 0) {
				t.Errorf("%s: %v (wrote %q), want %q", tc.name, err, out.String(), tc.err)
			}
			continue
		}
		if err != nil || out.String() != tc.want || f.Size != 5 || f.Mode != 420 {
			t.Errorf("%s: %v %+v %q", tc.name, err, f, out.String())
		}
	}
}

// serveExecutor serves h as the executor socket in a new directory.
func serveExecutor(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, proto.ExecSocketName))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return dir
}

// The gateway asks for binary frames and reads only those: any other
// answer (NDJSON included, the format before them) is an error, not output.
func TestRunNegotiatesFrames(t *testing.T) {
	t.Parallel()
	answers := map[string]http.HandlerFunc{
		"binary": func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Accept") != proto.ExecFramesMedia || r.Header.Get(proto.ExecBuiltinHeader) != proto.ExecBuiltinPut {
				t.Errorf("Accept %q, %s %q", r.Header.Get("Accept"), proto.ExecBuiltinHeader, r.Header.Get(proto.ExecBuiltinHeader))
			}
			w.Header().Set("Content-Type", proto.ExecFramesMedia)
			for _, fr := range []struct {
				kind byte
				data string
			}{{proto.FrameStdout, "hel"}, {proto.FrameStderr, "err"}, {proto.FrameStdout, "lo"}} {
				h := make([]byte, proto.FrameHeaderLen)
				proto.PutFrameHeader(h, fr.kind, len(fr.data))
				w.Write(append(h, fr.data...))
			}
			w.Write(proto.ExitFrame(proto.ExecExit{ExitCode: 3}))
		},
		"ndjson": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			io.WriteString(w, `{"stdout":"aGVs"}`+"\n"+`{"exit":{"exitCode":3}}`+"\n")
		},
		"unknown": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "hello")
		},
	}
	media := map[string]string{"ndjson": "application/x-ndjson", "unknown": "text/plain"}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			dir := serveExecutor(t, answer)
			var o, e bytes.Buffer
			out, err := Run(context.Background(), dir, os.Getuid(), &proto.ExecRequest{Argv: []string{"x"}}, nil, &o, &e, 0)
			if name != "binary" {
				if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), fmt.Sprintf("Content-Type %q", media[name])) || o.Len() != 0 {
					t.Fatalf("got %v, output %q", err, o.String())
				}
				return
			}
			if err != nil || out.ExitCode != 3 || o.String() != "hello" || e.String() != "err" {
				t.Fatalf("got %v %+v %q %q", err, out, o.String(), e.String())
			}
		})
	}
}

// brokenWriter fails every write.
type brokenWriter struct{ err error }

func (b brokenWriter) Write([]byte) (int, error) { return 0, b.err }

// A writer of the caller's that fails ends the call with that writer's
// error, not ErrLost: the sandbox was not lost, and ErrLost's callers go
// on to wait for a container that is not stopping. The connection is not
// kept: closing it is what ends the command in the sandbox.
func TestRunWriterFails(t *testing.T) {
	t.Parallel()
	refused := errors.New("refused by the caller")
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, proto.ExecSocketName))
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	srv := &http.Server{
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", proto.ExecFramesMedia)
			for _, kind := range []byte{proto.FrameStderr, proto.FrameStdout} {
				h := make([]byte, proto.FrameHeaderLen)
				proto.PutFrameHeader(h, kind, 2)
				w.Write(append(h, "ab"...))
			}
			w.Write(proto.ExitFrame(proto.ExecExit{ExitCode: 0}))
		}),
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	for _, broken := range []string{"stdout", "stderr"} {
		t.Run(broken, func(t *testing.T) {
			var stdout, stderr io.Writer = &bytes.Buffer{}, &bytes.Buffer{}
			if broken == "stdout" {
				stdout = brokenWriter{refused}
			} else {
				stderr = brokenWriter{refused}
			}
			_, err := Run(context.Background(), dir, os.Getuid(), &proto.ExecRequest{Argv: []string{"x"}}, nil, stdout, stderr, 0)
			if !errors.Is(err, refused) || errors.Is(err, ErrLost) {
				t.Fatalf("got %v, want the writer's own error", err)
			}
		})
	}
	// Neither connection was kept: the next two calls dial a third, which
	// the second keeps.
	for range 2 {
		if _, err := Run(context.Background(), dir, os.Getuid(), &proto.ExecRequest{Argv: []string{"x"}}, nil, io.Discard, io.Discard, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for four calls, want 3", n)
	}
}
