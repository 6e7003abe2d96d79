package hostexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

func TestReadJSONFrames(t *testing.T) {
	tests := []struct {
		name, in       string
		stdout, stderr string
		out            *gateway.ExecOutcome
		err            string
	}{
		{"output then exit", `{"stdout":"aGk="}` + "\n" + `{"stderr":"ZXJy"}` + "\n" + `{"exit":{"exitCode":3,"timedOut":true}}` + "\n", "hi", "err", &gateway.ExecOutcome{ExitCode: 3, TimedOut: true}, ""},
		{"no exit", `{"stdout":"aGk="}` + "\n", "hi", "", nil, "without an exit frame"},
		{"cut exit", `{"exit":{"exitCode":0}}`, "", "", nil, "without an exit frame"},
		{"unknown field", `{"stdout":"aGk=","x":1}` + "\n", "", "", nil, "unknown field"},
		{"two fields", `{"stdout":"aGk=","stderr":"aGk="}` + "\n", "", "", nil, "2 fields"},
		{"empty", "{}\n", "", "", nil, "0 fields"},
		{"trailing", `{"exit":{"exitCode":0}} {}` + "\n", "", "", nil, "trailing"},
		{"exit code range", `{"exit":{"exitCode":256}}` + "\n", "", "", nil, "exit code 256"},
		{"negative exit", `{"exit":{"exitCode":-1}}` + "\n", "", "", nil, "exit code -1"},
		{"not json", "hello\n", "", "", nil, "bad executor frame"},
		{"huge frame", `{"stdout":"` + strings.Repeat("A", proto.MaxExecLine) + `"}` + "\n", "", "", nil, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o, e bytes.Buffer
			out, err := readJSONFrames(strings.NewReader(tt.in), &o, &e)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v %+v, want error %q", err, out, tt.err)
				}
				return
			}
			if err != nil || *out != *tt.out || o.String() != tt.stdout || e.String() != tt.stderr {
				t.Fatalf("got %v %+v %q %q", err, out, o.String(), e.String())
			}
		})
	}
}

func FuzzReadJSONFrames(f *testing.F) {
	f.Add([]byte(`{"stdout":"aGk="}` + "\n" + `{"exit":{"exitCode":0}}` + "\n"))
	f.Add([]byte(`{"stderr":""}` + "\n" + `{"exit":{"exitCode":124,"timedOut":true}}` + "\n"))
	f.Add([]byte(`{"exit":{"exitCode":1e3}}` + "\n"))
	f.Add([]byte(`{"STDOUT":"aGk=","Exit":null}` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var o, e bytes.Buffer
		out, err := readJSONFrames(bytes.NewReader(in), &o, &e)
		if err == nil && (out == nil || out.ExitCode < 0 || out.ExitCode > 255) {
			t.Fatalf("accepted %q as %+v", in, out)
		}
		if o.Len()+e.Len() > len(in) {
			t.Fatalf("more output than input: %d+%d > %d", o.Len(), e.Len(), len(in))
		}
	})
}

// FuzzFastFrameAgrees: the fast path takes a line only when the strict
// decoder reads it as the same frame.
func FuzzFastFrameAgrees(f *testing.F) {
	for _, s := range []string{`{"stdout":"aGk="}`, `{"stderr":""}`, `{"stdout":"aGk=","stderr":"aGk="}`,
		`{"stdout":"aG\rk="}`, `{"stdout":"aGk\/"}`, `{"stdout":"aGk"}`, `{"stdout":"aGk=" }`} {
		f.Add([]byte(s + "\n"))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fast := fastOutputFrame(line)
		if fast == nil {
			return
		}
		slow, err := decodeExecFrame(line)
		if err != nil {
			t.Fatalf("fast path took %q, the decoder refuses it: %v", line, err)
		}
		if !bytes.Equal(fast.Stdout, slow.Stdout) || !bytes.Equal(fast.Stderr, slow.Stderr) ||
			(fast.Stdout == nil) != (slow.Stdout == nil) || (fast.Stderr == nil) != (slow.Stderr == nil) || slow.Exit != nil {
			t.Fatalf("%q: fast %+v, decoder %+v", line, fast, slow)
		}
	})
}

// BenchmarkOutputFrame: one full NDJSON output frame (proto.ExecChunk
// bytes) read by the fast path beside the JSON decoder it replaces for such
// frames, and the same bytes as a binary frame (with its exit frame).
//
//	go test ./internal/host/sandbox/hostexec -run '^$' -bench OutputFrame
func BenchmarkOutputFrame(b *testing.B) {
	chunk := bytes.Repeat([]byte{0, 1, 2, 0xff, 'a'}, proto.ExecChunk/5)
	line, _ := json.Marshal(proto.ExecFrame{Stdout: chunk})
	line = append(line, '\n')
	for name, parse := range map[string]func([]byte) (*proto.ExecFrame, error){
		"fast":    parseExecFrame,
		"decoder": decodeExecFrame,
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				if fr, err := parse(line); err != nil || len(fr.Stdout) != len(chunk) {
					b.Fatal(err)
				}
			}
		})
	}
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

// The gateway asks for binary frames and reads what the executor chose:
// binary frames from a current one, NDJSON from one that predates them (an
// older client binary still running in a sandbox); any other answer is an
// error, not output.
func TestRunNegotiatesFrames(t *testing.T) {
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
			io.WriteString(w, `{"stdout":"aGVs"}`+"\n"+`{"stderr":"ZXJy"}`+"\n"+`{"stdout":"bG8="}`+"\n"+`{"exit":{"exitCode":3}}`+"\n")
		},
		"unknown": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "hello")
		},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			dir := serveExecutor(t, answer)
			var o, e bytes.Buffer
			out, err := Run(context.Background(), dir, os.Getuid(), &proto.ExecRequest{Argv: []string{"x"}}, nil, &o, &e, 0)
			if name == "unknown" {
				if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), `Content-Type "text/plain"`) || o.Len() != 0 {
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
