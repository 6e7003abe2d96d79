package hostexec

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/proto"
)

// listenCounting serves a Unix socket at path and counts its connections:
// a stand-in for a socket the gateway must never be steered to.
func listenCounting(t *testing.T, path string) *atomic.Int64 {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

func TestDialRefusesPlantedFiles(t *testing.T) {
	uid := os.Getuid()
	victim := filepath.Join(t.TempDir(), "admin.sock")
	accepted := listenCounting(t, victim)
	tests := []struct {
		name  string
		plant func(dir string) error
		uid   int
		want  string // "" = connects
	}{
		{"real socket", func(dir string) error { listenCounting(t, filepath.Join(dir, proto.ExecSocketName)); return nil }, uid, ""},
		{"missing", func(string) error { return nil }, uid, "no such file"},
		{"symlink to another socket", func(dir string) error { return os.Symlink(victim, filepath.Join(dir, proto.ExecSocketName)) }, uid, "not a socket"},
		{"symlink to the docker socket", func(dir string) error {
			return os.Symlink("/var/run/docker.sock", filepath.Join(dir, proto.ExecSocketName))
		}, uid, "not a socket"},
		{"fifo", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, proto.ExecSocketName), 0o600) }, uid, "not a socket"},
		{"regular file", func(dir string) error { return os.WriteFile(filepath.Join(dir, proto.ExecSocketName), nil, 0o600) }, uid, "not a socket"},
		{"socket of another user", func(dir string) error { listenCounting(t, filepath.Join(dir, proto.ExecSocketName)); return nil }, uid + 1, "owned by uid"},
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

func TestReadFrames(t *testing.T) {
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
			out, err := ReadFrames(strings.NewReader(tt.in), &o, &e)
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

func FuzzReadFrames(f *testing.F) {
	f.Add([]byte(`{"stdout":"aGk="}` + "\n" + `{"exit":{"exitCode":0}}` + "\n"))
	f.Add([]byte(`{"stderr":""}` + "\n" + `{"exit":{"exitCode":124,"timedOut":true}}` + "\n"))
	f.Add([]byte(`{"exit":{"exitCode":1e3}}` + "\n"))
	f.Add([]byte(`{"STDOUT":"aGk=","Exit":null}` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var o, e bytes.Buffer
		out, err := ReadFrames(bytes.NewReader(in), &o, &e)
		if err == nil && (out == nil || out.ExitCode < 0 || out.ExitCode > 255) {
			t.Fatalf("accepted %q as %+v", in, out)
		}
		if o.Len()+e.Len() > len(in) {
			t.Fatalf("more output than input: %d+%d > %d", o.Len(), e.Len(), len(in))
		}
	})
}
