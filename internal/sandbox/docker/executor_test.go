package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
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

func TestDialExecutorRefusesPlantedFiles(t *testing.T) {
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
			c, err := dialExecutor(context.Background(), dir, tt.uid)
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
	if c, err := dialExecutor(context.Background(), link, uid); err == nil {
		c.Close()
		t.Fatal("followed a symlinked directory")
	}
	if accepted.Load() != 0 {
		t.Fatalf("the victim socket got %d connections", accepted.Load())
	}
}

func TestReadExecFrames(t *testing.T) {
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
			out, err := readExecFrames(strings.NewReader(tt.in), &o, &e)
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

func FuzzReadExecFrames(f *testing.F) {
	f.Add([]byte(`{"stdout":"aGk="}` + "\n" + `{"exit":{"exitCode":0}}` + "\n"))
	f.Add([]byte(`{"stderr":""}` + "\n" + `{"exit":{"exitCode":124,"timedOut":true}}` + "\n"))
	f.Add([]byte(`{"exit":{"exitCode":1e3}}` + "\n"))
	f.Add([]byte(`{"STDOUT":"aGk=","Exit":null}` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var o, e bytes.Buffer
		out, err := readExecFrames(bytes.NewReader(in), &o, &e)
		if err == nil && (out == nil || out.ExitCode < 0 || out.ExitCode > 255) {
			t.Fatalf("accepted %q as %+v", in, out)
		}
		if o.Len()+e.Len() > len(in) {
			t.Fatalf("more output than input: %d+%d > %d", o.Len(), e.Len(), len(in))
		}
	})
}

// executorPid finds the executor inside the sandbox (through the Engine).
func executorPid(t *testing.T, sb *Sandbox) int {
	t.Helper()
	var ps bytes.Buffer
	if code, _, err := sb.runEngine(context.Background(), []string{"ps", "-o", "pid,args"}, nil, &ps, &capWriter{max: 4096}); err != nil || code != 0 {
		t.Fatal(code, err)
	}
	for _, l := range strings.Split(ps.String(), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[2] == "executor" {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	t.Fatalf("no executor running:\n%s", ps.String())
	return 0
}

func TestExecutorRestartedByInit(t *testing.T) {
	_, sb := newAgent(t)
	ctx := context.Background()
	old := executorPid(t, sb)
	// Killed mid-call: the call ends with a clear error, not a hang.
	done := make(chan execResult, 1)
	go func() {
		done <- runVia(ctx, 0, sb, gateway.ExecSpec{Argv: []string{"sleep", "100"}, CallID: "orphaned"})
	}()
	waitForCall(t, sb, "orphaned")
	if code, msg, err := sb.runEngine(ctx, []string{"kill", "-KILL", strconv.Itoa(old)}, nil, nil, &capWriter{max: 4096}); err != nil || code != 0 {
		t.Fatal(code, msg, err)
	}
	r := <-done
	if r.err == nil || !strings.Contains(r.err.Error(), "connection to the sandbox executor lost") {
		t.Fatalf("call on a killed executor: %v %+v", r.err, r.out)
	}
	// Meanwhile Exec falls back to the Engine and works.
	if r := mustRun(t, sb, "echo", "fallback"); r.stdout != "fallback\n" {
		t.Fatalf("fallback: %+v", r)
	}
	waitExecutor(t, sb)
	if now := executorPid(t, sb); now == old {
		t.Fatalf("executor pid %d not restarted", now)
	}
	if r := runVia(ctx, 0, sb, gateway.ExecSpec{Argv: []string{"echo", "back"}}); r.err != nil || r.stdout != "back\n" {
		t.Fatalf("after restart: %+v", r)
	}
}

// Whatever the sandbox plants at the socket path, the gateway does not
// connect to it, and Exec still works through the Engine.
func TestPlantedExecutorSocketRefused(t *testing.T) {
	spec, sb := newAgent(t)
	ctx := context.Background()
	sock := filepath.Join(spec.ExecDir(), proto.ExecSocketName)
	victim := filepath.Join(testTmp, fmt.Sprintf("victim-%d.sock", os.Getpid()))
	accepted := listenCounting(t, victim)
	plants := map[string]func() error{
		"symlink": func() error { return os.Symlink(victim, sock) },
		"fifo":    func() error { return syscall.Mkfifo(sock, 0o600) },
	}
	for name, plant := range plants {
		t.Run(name, func(t *testing.T) {
			if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if err := plant(); err != nil {
				t.Fatal(err)
			}
			if _, err := sb.execExecutor(ctx, &gateway.ExecSpec{Argv: []string{"true"}}, "x"); !errors.Is(err, errNoExecutor) {
				t.Fatalf("executor path: %v", err)
			}
			var out bytes.Buffer
			res, err := sb.Exec(ctx, &gateway.ExecSpec{Argv: []string{"echo", "engine"}, Stdout: &out, Stderr: io.Discard})
			if err != nil || res.ExitCode != 0 || out.String() != "engine\n" {
				t.Fatalf("fallback: %v %+v %q", err, res, out.String())
			}
			if err := sb.WriteFile(ctx, "/tmp/f", []byte("x")); err != nil {
				t.Fatal(err)
			}
		})
	}
	if accepted.Load() != 0 {
		t.Fatalf("the gateway connected to the planted target %d times", accepted.Load())
	}
}
