// Package sandboxtest is the conformance suite of sandbox.Backend: Run
// checks, against a real backend, every promise the contract makes (exec,
// cancel and timeout, files streamed both ways, a lost sandbox, Remove,
// Sync after a spec change, Up, Status). Every backend's tests run it, so
// two backends that drift apart fail the same shared test.
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/proto"
)

// Harness is a backend under test and what the suite cannot do through
// the contract itself.
type Harness struct {
	// Backend is the backend under test. The suite configures it with its
	// own agents (SetSpecs) and removes their sandboxes at the end.
	Backend sandbox.Backend
	// Spec is the spec of a new agent named after name (short, lowercase),
	// on a fresh workspace, with the backend's test image, user 1000:1000.
	Spec func(t testing.TB, name string) sandbox.AgentSpec
	// Lose takes the agent's sandbox away underneath the backend, as an
	// operator or a failing node would (`docker rm -f`, a pod deleted at
	// once), without telling it, and returns once it is gone.
	Lose func(t testing.TB, agent string)
	// Paths are the ways into a sandbox the exec cases run over, by name:
	// each gives the handle as calls through that way see it (say, with
	// the warm executor out of the way). Nil: the handle as it is.
	Paths map[string]func(gateway.Sandbox) gateway.Sandbox
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h, specs: map[string]sandbox.AgentSpec{}}
	t.Cleanup(s.removeAll)
	ex := s.agent(t, "exec")
	paths := h.Paths
	if paths == nil {
		paths = map[string]func(gateway.Sandbox) gateway.Sandbox{"handle": func(sb gateway.Sandbox) gateway.Sandbox { return sb }}
	}
	for _, name := range slices.Sorted(maps.Keys(paths)) {
		t.Run("exec/"+name, func(t *testing.T) { s.exec(t, paths[name](s.sandbox(t, ex.Agent))) })
		t.Run("kill/"+name, func(t *testing.T) { s.kill(t, paths[name](s.sandbox(t, ex.Agent))) })
	}
	t.Run("files", func(t *testing.T) { s.files(t, s.sandbox(t, ex.Agent)) })
	t.Run("stream", func(t *testing.T) { s.stream(t, s.sandbox(t, ex.Agent)) })
	t.Run("lost", s.lost)
	t.Run("remove", s.remove)
	t.Run("stop and find", s.stopAndFind)
	t.Run("sync", s.sync)
	t.Run("up", s.up)
	t.Run("status", s.status)
}

type suite struct {
	h     Harness
	mu    sync.Mutex
	specs map[string]sandbox.AgentSpec // the agents configured so far
}

// agent configures a new agent beside the suite's others and brings its
// sandbox up.
func (s *suite) agent(t *testing.T, name string) sandbox.AgentSpec {
	t.Helper()
	spec := s.h.Spec(t, name)
	s.configure(t, spec)
	if _, err := s.h.Backend.Sync(context.Background(), spec); err != nil {
		t.Fatalf("bringing up %s: %v", spec.Agent, err)
	}
	return spec
}

// configure installs spec with the suite's other agents' specs.
func (s *suite) configure(t testing.TB, spec sandbox.AgentSpec) {
	t.Helper()
	s.mu.Lock()
	s.specs[spec.Agent] = spec
	all := make([]sandbox.AgentSpec, 0, len(s.specs))
	for _, a := range slices.Sorted(maps.Keys(s.specs)) {
		all = append(all, s.specs[a])
	}
	s.mu.Unlock()
	if err := s.h.Backend.SetSpecs(all); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) removeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a := range s.specs {
		_ = s.h.Backend.Remove(context.Background(), a)
	}
}

func (s *suite) sandbox(t testing.TB, agent string) gateway.Sandbox {
	t.Helper()
	sb, err := s.h.Backend.Sandbox(context.Background(), agent)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// status is the agent's row of Status.
func (s *suite) status(t *testing.T) {
	ctx := context.Background()
	st, err := s.h.Backend.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	want := slices.Sorted(maps.Keys(s.specs))
	s.mu.Unlock()
	var got []string
	for _, r := range st {
		got = append(got, r.Agent)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Status lists %q, want the configured agents in order, %q", got, want)
	}
	for _, r := range st {
		if r.State == sandbox.StateMissing {
			continue // removed by a case
		}
		if r.State != sandbox.StateRunning || r.ContainerID == "" || r.Image != s.specs[r.Agent].Image || r.StartedAt.IsZero() {
			t.Errorf("status of %s: %+v, want running since a time, with its id and image %s", r.Agent, r, s.specs[r.Agent].Image)
		}
	}
	if _, err := s.h.Backend.Sandbox(ctx, "no-such-agent"); err == nil {
		t.Error("a sandbox for an agent never configured")
	}
}

func (s *suite) row(t testing.TB, agent string) sandbox.Status {
	t.Helper()
	st, err := s.h.Backend.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st {
		if r.Agent == agent {
			return r
		}
	}
	t.Fatalf("no status for %s", agent)
	return sandbox.Status{}
}

type result struct {
	stdout, stderr string
	out            *gateway.ExecOutcome
	err            error
}

func run(ctx context.Context, sb gateway.Sandbox, spec gateway.ExecSpec) result {
	var o, e bytes.Buffer
	if spec.Stdout == nil {
		spec.Stdout = &o
	}
	if spec.Stderr == nil {
		spec.Stderr = &e
	}
	out, err := sb.Exec(ctx, &spec)
	return result{o.String(), e.String(), out, err}
}

func must(t testing.TB, sb gateway.Sandbox, argv ...string) result {
	t.Helper()
	r := run(context.Background(), sb, gateway.ExecSpec{Argv: argv})
	if r.err != nil {
		t.Fatalf("%q: %v", argv, r.err)
	}
	return r
}

func (s *suite) exec(t *testing.T, sb gateway.Sandbox) {
	tests := []struct {
		name           string
		spec           gateway.ExecSpec
		code           int
		stdout, stderr string
	}{
		{"exit code and streams", gateway.ExecSpec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}}, 3, "out\n", "err\n"},
		{"argv is not a shell", gateway.ExecSpec{Argv: []string{"echo", "$(id)", "a b", `"q'`, ";", "`id`"}}, 0, "$(id) a b \"q' ; `id`\n", ""},
		{"user and workspace", gateway.ExecSpec{Argv: []string{"sh", "-c", "id -u; id -g; pwd"}}, 0, "1000\n1000\n/workspace\n", ""},
		{"stdin", gateway.ExecSpec{Argv: []string{"sh", "-c", "wc -c; cat >/dev/null"}, Stdin: strings.NewReader(strings.Repeat("x", 100000))}, 0, "100000\n", ""},
		{"no stdin reads /dev/null", gateway.ExecSpec{Argv: []string{"readlink", "/proc/self/fd/0"}}, 0, "/dev/null\n", ""},
		{"cwd, env and the call's id", gateway.ExecSpec{Argv: []string{"sh", "-c", "pwd; echo $TG_X; echo $TOOLGATE_CALL_ID"}, Cwd: "/tmp", Env: []string{"TG_X=a b"}, CallID: "call-1"}, 0, "/tmp\na b\ncall-1\n", ""},
		{"killed by a signal", gateway.ExecSpec{Argv: []string{"sh", "-c", "kill -TERM $$"}}, 128 + 15, "", ""},
		{"not found", gateway.ExecSpec{Argv: []string{"no-such-command"}}, 127, "", "toolgate-client run: exec: \"no-such-command\": executable file not found in $PATH\n"},
		{"cwd missing", gateway.ExecSpec{Argv: []string{"pwd"}, Cwd: "/workspace/no-such-dir"}, 126, "", "toolgate-client run: chdir /workspace/no-such-dir: no such file or directory\n"},
		{"cwd a file", gateway.ExecSpec{Argv: []string{"pwd"}, Cwd: "/etc/hostname"}, 126, "", "toolgate-client run: chdir /etc/hostname: not a directory\n"},
		{"exit 124 within its timeout is no timeout", gateway.ExecSpec{Argv: []string{"sh", "-c", "exit 124"}, Timeout: time.Minute}, 124, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(context.Background(), sb, tt.spec)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.out.ExitCode != tt.code || r.stdout != tt.stdout || r.stderr != tt.stderr || r.out.TimedOut {
				t.Fatalf("got exit %d timedOut=%v stdout %q stderr %q; want %d %q %q",
					r.out.ExitCode, r.out.TimedOut, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
	t.Run("large output", func(t *testing.T) {
		var out, errw counter
		const size = 32 << 20
		r := run(context.Background(), sb, gateway.ExecSpec{
			Argv:   []string{"sh", "-c", fmt.Sprintf("yes 0123456789abcdef | head -c %d; echo done >&2", size)},
			Stdout: &out, Stderr: &errw,
		})
		if r.err != nil || r.out.ExitCode != 0 || out.n != size || errw.n != 5 {
			t.Fatalf("%v %+v: stdout %d bytes, stderr %d", r.err, r.out, out.n, errw.n)
		}
	})
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var errSinkBroken = errors.New("sink broken")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errSinkBroken }

// kill: however a call ends before its command does — its timeout, its
// caller gone (with or without stdin), its output nobody takes — its whole
// process tree ends with it.
func (s *suite) kill(t *testing.T, sb gateway.Sandbox) {
	// Each case's own sleep, so one left by another case is not counted.
	tree := func(n int) []string {
		return []string{"sh", "-c", fmt.Sprintf("echo started; sleep %d & sleep %d", n, n)}
	}
	t.Run("timeout", func(t *testing.T) {
		r := run(context.Background(), sb, gateway.ExecSpec{Argv: tree(3601), Timeout: time.Second})
		if r.err != nil || !r.out.TimedOut || r.out.ExitCode != 124 || !strings.Contains(r.stderr, "timed out") {
			t.Fatalf("got %v %+v stderr %q", r.err, r.out, r.stderr)
		}
		noneLeft(t, sb, 3601)
	})
	for i, stdin := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel/stdin=%v", stdin), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := 3602 + i
			id := fmt.Sprintf("cancel-%d-%d", n, time.Now().UnixNano())
			spec := gateway.ExecSpec{Argv: tree(n), CallID: id}
			if stdin {
				// Never read, never ended: the way in is blocked feeding it.
				pr, pw := io.Pipe()
				defer pw.Close()
				go pw.Write(make([]byte, 1<<20))
				spec.Stdin = pr
			}
			done := make(chan result, 1)
			go func() { done <- run(ctx, sb, spec) }()
			waitForCall(t, sb, id)
			cancel()
			select {
			case r := <-done:
				if !errors.Is(r.err, context.Canceled) {
					t.Fatalf("got %v %+v, want the context's error", r.err, r.out)
				}
			case <-time.After(time.Minute):
				t.Fatal("a cancelled call did not return")
			}
			noneLeft(t, sb, n)
		})
	}
	t.Run("broken output writer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard, not a timing
		defer cancel()
		r := run(ctx, sb, gateway.ExecSpec{Argv: tree(3604), Stdout: failingWriter{}})
		if !errors.Is(r.err, errSinkBroken) {
			t.Fatalf("got %v %+v, want the writer's own error", r.err, r.out)
		}
		noneLeft(t, sb, 3604)
	})
}

// waitForCall waits until the in-sandbox client recorded the call's
// process group (a backend's exec API can take seconds to start on a
// loaded machine).
func waitForCall(t testing.TB, sb gateway.Sandbox, id string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if must(t, sb, "test", "-L", proto.CallsDir+"/"+id).out.ExitCode == 0 {
			return
		}
	}
	t.Fatalf("call %s never started", id)
}

// noneLeft fails when a `sleep n` outlives its call. The sandbox's init
// reaps a killed process a moment later, so a loaded machine gets a while.
func noneLeft(t testing.TB, sb gateway.Sandbox, n int) {
	t.Helper()
	mark := fmt.Sprintf("sleep %d", n)
	var r result
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r = must(t, sb, "ps", "-o", "pid,args"); !strings.Contains(r.stdout, mark) {
			return
		}
	}
	t.Fatalf("the call's processes outlived it:\n%s", r.stdout)
}

func (s *suite) files(t *testing.T, sb gateway.Sandbox) {
	ctx := context.Background()
	t.Run("round trip", func(t *testing.T) {
		for _, n := range []string{
			"/workspace/plain.txt", "/workspace/with space.txt", `/workspace/quo"te's.txt`, "/workspace/new\nline.txt",
			"/workspace/$(touch pwned).txt", "/workspace/`id`;rm -rf x", "/workspace/-dash.txt",
			"/workspace/deep/er/dir with space/$(x)/f.txt", "/workspace/ünïcødé.txt",
			"/tmp/plain", "/tmp/sub dir/$(touch pwned) \"q'\n.txt",
		} {
			data := []byte("content of " + n + "\x00\xff")
			if err := sb.WriteFile(ctx, n, data); err != nil {
				t.Fatalf("write %q: %v", n, err)
			}
			f, err := sb.ReadFile(ctx, n, -1)
			if err != nil || !bytes.Equal(f.Data, data) || f.Size != int64(len(data)) || f.Mode != 0o644 {
				t.Fatalf("read %q: %v %+v", n, err, f)
			}
			if r := must(t, sb, "cat", "--", n); r.stdout != string(data) {
				t.Fatalf("%q as the sandbox sees it: %q", n, r.stdout)
			}
			if r := must(t, sb, "stat", "-c", "%u:%g", n); r.stdout != "1000:1000\n" {
				t.Fatalf("%q owned by %s", n, r.stdout)
			}
		}
		for _, p := range []string{"/tmp/pwned", "/tmp/sub dir/pwned", "/workspace/pwned"} {
			if must(t, sb, "test", "-e", p).out.ExitCode == 0 {
				t.Fatalf("a file name went through a shell: %s exists", p)
			}
		}
		if r := must(t, sb, "ls", "-A", "/workspace", "/tmp", "/tmp/sub dir"); strings.Contains(r.stdout, ".toolgate-tmp") {
			t.Fatalf("a temporary file was left:\n%s", r.stdout)
		}
	})
	t.Run("limit and mode", func(t *testing.T) {
		const p = "/workspace/limited.txt"
		if err := sb.WriteFile(ctx, p, []byte("first")); err != nil {
			t.Fatal(err)
		}
		must(t, sb, "chmod", "755", p)
		if err := sb.WriteFile(ctx, p, []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		f, err := sb.ReadFile(ctx, p, 4)
		if err != nil || string(f.Data) != "0123" || f.Size != 10 || f.Mode != 0o755 {
			t.Fatalf("limited read of a replaced file: %v %+v, want 4 bytes of 10, mode 755 kept", err, f)
		}
	})
	errs := []struct {
		name string
		op   func() error
		want string
	}{
		{"read a directory", func() error { _, err := sb.ReadFile(ctx, "/workspace", -1); return err }, "is a directory"},
		{"read a missing path", func() error { _, err := sb.ReadFile(ctx, "/workspace/nope", -1); return err }, "open /workspace/nope: no such file or directory"},
		{"read a relative path", func() error { _, err := sb.ReadFile(ctx, "workspace/x", -1); return err }, "not absolute"},
		{"write a relative path", func() error { return sb.WriteFile(ctx, "x", []byte("x")) }, "not absolute"},
		{"write the read-only root", func() error { return sb.WriteFile(ctx, "/etc/evil", []byte("x")) }, "read-only file system"},
		{"write a new directory in the root", func() error { return sb.WriteFile(ctx, "/usr/newdir/x", []byte("x")) }, "read-only file system"},
		{"read a tmpfs directory", func() error { _, err := sb.ReadFile(ctx, "/tmp", -1); return err }, "is a directory"},
		{"read a missing path on tmpfs", func() error { _, err := sb.ReadFile(ctx, "/tmp/nope", -1); return err }, "/tmp/nope"},
		{"write over a directory", func() error { return sb.WriteFile(ctx, "/workspace", []byte("x")) }, "is a directory"},
		{"write a read-only mount", func() error { return sb.WriteFile(ctx, "/tools/bin/x", []byte("x")) }, "open /tools/bin/.toolgate-tmp-"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("symlinks resolve inside the sandbox", func(t *testing.T) {
		must(t, sb, "sh", "-c", "cd /workspace && ln -sfn / root && ln -sfn /etc etc && ln -sfn /etc/passwd passwd && ln -sfn ../../../../etc/passwd rel")
		for _, p := range []string{"/workspace/root/etc/passwd", "/workspace/etc/passwd", "/workspace/passwd", "/workspace/rel"} {
			f, err := sb.ReadFile(ctx, p, -1)
			// The sandbox's passwd has the agent user; no host's has.
			if err != nil || !strings.Contains(string(f.Data), "agent:x:1000:1000:agent:/workspace:/bin/sh") {
				t.Fatalf("%s: %v, resolved outside the sandbox", p, err)
			}
		}
		if err := sb.WriteFile(ctx, "/workspace/etc/toolgate-test", []byte("x")); err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Fatalf("a write through a link to /etc: %v", err)
		}
		if _, err := os.Stat("/etc/toolgate-test"); err == nil {
			t.Fatal("a write through a link reached the host's /etc")
		}
		// A path only the host has is not there through a link.
		marker := filepath.Join(t.TempDir(), "host-only")
		if err := os.WriteFile(marker, []byte("host"), 0o644); err != nil {
			t.Fatal(err)
		}
		must(t, sb, "ln", "-sfn", marker, "/workspace/hostlink")
		if f, err := sb.ReadFile(ctx, "/workspace/hostlink", -1); err == nil {
			t.Fatalf("a host path was read through a link: %q", f.Data)
		}
	})
}

// stream: files of any size both ways, without holding them
// (gateway.StreamWriter, gateway.StreamReader).
func (s *suite) stream(t *testing.T, sb gateway.Sandbox) {
	sw, okw := sb.(gateway.StreamWriter)
	sr, okr := sb.(gateway.StreamReader)
	if !okw || !okr {
		t.Fatalf("the handle %T streams files: writes %v, reads %v; want both", sb, okw, okr)
	}
	ctx := context.Background()
	const p, size = "/workspace/big/file.bin", 24 << 20
	content := func() io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{7}), size) }
	want := sha256.New()
	io.Copy(want, content())
	var wantSum [32]byte
	want.Sum(wantSum[:0])

	t.Run("write", func(t *testing.T) {
		sum, err := sw.WriteFileFrom(ctx, p, content(), size, nil)
		if err != nil || sum != wantSum {
			t.Fatalf("%v, digest %x, want %x", err, sum, wantSum)
		}
		if r := must(t, sb, "sha256sum", p); !strings.HasPrefix(r.stdout, fmt.Sprintf("%x ", wantSum)) {
			t.Fatalf("as the sandbox has it: %s", r.stdout)
		}
	})
	t.Run("read", func(t *testing.T) {
		h := sha256.New()
		var seen int64 = -1
		f, err := sr.ReadFileTo(ctx, p, -1, func(f *gateway.File) error { seen = f.Size; return nil }, h)
		if err != nil || f.Size != size || seen != size || !bytes.Equal(h.Sum(nil), wantSum[:]) {
			t.Fatalf("%v %+v, size seen first %d", err, f, seen)
		}
	})
	t.Run("read refused before a byte", func(t *testing.T) {
		refused := errors.New("too big")
		var w counter
		_, err := sr.ReadFileTo(ctx, p, -1, func(*gateway.File) error { return refused }, &w)
		if !errors.Is(err, refused) || w.n != 0 {
			t.Fatalf("%v, %d bytes written", err, w.n)
		}
	})
	t.Run("read limited", func(t *testing.T) {
		var w counter
		f, err := sr.ReadFileTo(ctx, p, 1000, nil, &w)
		if err != nil || f.Size != size || w.n != 1000 {
			t.Fatalf("%v %+v, %d bytes", err, f, w.n)
		}
	})
	t.Run("a short stream leaves the file", func(t *testing.T) {
		if _, err := sw.WriteFileFrom(ctx, p, io.LimitReader(content(), size/2), size, nil); err == nil {
			t.Fatal("content shorter than its size was taken")
		}
		if r := must(t, sb, "sha256sum", p); !strings.HasPrefix(r.stdout, fmt.Sprintf("%x ", wantSum)) {
			t.Fatalf("the file changed: %s", r.stdout)
		}
	})
	t.Run("a wrong digest leaves the file", func(t *testing.T) {
		wrong := [32]byte{1}
		if _, err := sw.WriteFileFrom(ctx, p, bytes.NewReader([]byte("other")), 5, &wrong); err == nil {
			t.Fatal("content not of its stated digest was taken")
		}
		if f, err := sb.ReadFile(ctx, p, 0); err != nil || f.Size != size {
			t.Fatalf("the file changed: %v %+v", err, f)
		}
	})
	t.Run("a missing path", func(t *testing.T) {
		if _, err := sr.ReadFileTo(ctx, "/workspace/nope", -1, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Fatalf("got %v", err)
		}
	})
}

// lost: a sandbox taken away under a call ends the call with ErrGone; one
// taken away between calls is made anew for the next; both on the same
// workspace.
func (s *suite) lost(t *testing.T) {
	spec := s.agent(t, "lost")
	ctx := context.Background()
	sb := s.sandbox(t, spec.Agent)
	must(t, sb, "sh", "-c", "echo kept > /workspace/kept")
	kept := func(t *testing.T, sb gateway.Sandbox, old string) {
		t.Helper()
		if r := must(t, sb, "cat", "/workspace/kept"); r.out.ExitCode != 0 || r.stdout != "kept\n" {
			t.Fatalf("the workspace after the sandbox was made anew: %+v %q", r.out, r.stderr)
		}
		if now := s.row(t, spec.Agent); now.ContainerID == old || now.State != sandbox.StateRunning {
			t.Fatalf("status after the sandbox was made anew: %+v (it was %s)", now, old)
		}
	}
	t.Run("under a call", func(t *testing.T) {
		old := s.row(t, spec.Agent).ContainerID
		id := fmt.Sprintf("victim-%d", time.Now().UnixNano())
		done := make(chan result, 1)
		go func() { done <- run(ctx, sb, gateway.ExecSpec{Argv: []string{"sleep", "3610"}, CallID: id}) }()
		waitForCall(t, sb, id)
		s.h.Lose(t, spec.Agent)
		select {
		case r := <-done:
			if !errors.Is(r.err, sandbox.ErrGone) {
				t.Fatalf("got %v %+v, want an error saying the sandbox went away", r.err, r.out)
			}
		case <-time.After(time.Minute):
			t.Fatal("the call did not end when its sandbox went")
		}
		kept(t, sb, old)
	})
	t.Run("between calls", func(t *testing.T) {
		old := s.row(t, spec.Agent).ContainerID
		s.h.Lose(t, spec.Agent)
		kept(t, sb, old) // the handle held, as a caller holds it
	})
	t.Run("between calls, a file read", func(t *testing.T) {
		old := s.row(t, spec.Agent).ContainerID
		s.h.Lose(t, spec.Agent)
		if f, err := sb.ReadFile(ctx, "/workspace/kept", -1); err != nil || string(f.Data) != "kept\n" {
			t.Fatalf("%v %+v", err, f)
		}
		kept(t, sb, old)
	})
}

// remove: Remove deletes the sandbox (Status: missing), not its workspace;
// the next call makes it anew.
func (s *suite) remove(t *testing.T) {
	spec := s.agent(t, "remove")
	ctx := context.Background()
	sb := s.sandbox(t, spec.Agent)
	must(t, sb, "sh", "-c", "echo kept > /workspace/kept")
	if err := s.h.Backend.Remove(ctx, spec.Agent); err != nil {
		t.Fatal(err)
	}
	if st := s.row(t, spec.Agent); st.State != sandbox.StateMissing || st.ContainerID != "" {
		t.Fatalf("status after Remove: %+v", st)
	}
	if r := must(t, sb, "cat", "/workspace/kept"); r.stdout != "kept\n" {
		t.Fatalf("after Remove: %+v %q", r.out, r.stderr)
	}
	if st := s.row(t, spec.Agent); st.State != sandbox.StateRunning {
		t.Fatalf("status after the call: %+v", st)
	}
	if err := s.h.Backend.Remove(ctx, "no-such-agent"); err != nil {
		t.Fatalf("removing what is not there: %v", err)
	}
}

// stopAndFind: Find lists the agent's sandbox as Status names it; Stop
// stops it (a container stays, a pod goes), not its workspace, and the
// next call starts it again; RemoveFound removes what Find gave, once.
func (s *suite) stopAndFind(t *testing.T) {
	spec := s.agent(t, "life")
	ctx := context.Background()
	sb := s.sandbox(t, spec.Agent)
	must(t, sb, "sh", "-c", "echo kept > /workspace/kept")
	found := func() sandbox.Found {
		t.Helper()
		all, err := s.h.Backend.Find(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := s.row(t, spec.Agent).ContainerID
		for _, f := range all {
			if f.Agent == spec.Agent && f.ID == id {
				return f
			}
		}
		t.Fatalf("Find does not list %s's sandbox %s: %+v", spec.Agent, id, all)
		return sandbox.Found{}
	}
	if f := found(); f.State != sandbox.StateRunning || f.Instance == "" || f.Name == "" || f.Created.IsZero() {
		t.Fatalf("found: %+v", f)
	}
	if err := s.h.Backend.Stop(ctx, spec.Agent); err != nil {
		t.Fatal(err)
	}
	if st := s.row(t, spec.Agent); st.State == sandbox.StateRunning {
		t.Fatalf("status after Stop: %+v", st)
	}
	if r := must(t, sb, "cat", "/workspace/kept"); r.stdout != "kept\n" {
		t.Fatalf("after Stop: %+v %q", r.out, r.stderr)
	}
	if st := s.row(t, spec.Agent); st.State != sandbox.StateRunning {
		t.Fatalf("status after the call: %+v", st)
	}
	f := found()
	for range 2 { // the second finds nothing to remove
		if err := s.h.Backend.RemoveFound(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.row(t, spec.Agent); st.State != sandbox.StateMissing {
		t.Fatalf("status after RemoveFound: %+v", st)
	}
	if err := s.h.Backend.Stop(ctx, "no-such-agent"); err != nil {
		t.Fatalf("stopping what is not there: %v", err)
	}
}

// sync: a reload's Sync keeps a sandbox whose spec is the same, makes a
// changed idle one anew at once, and one with a call in flight once the
// call has finished — new calls wait for it, the call is not cut.
func (s *suite) sync(t *testing.T) {
	spec := s.agent(t, "sync")
	ctx := context.Background()
	must(t, s.sandbox(t, spec.Agent), "sh", "-c", "echo kept > /workspace/kept")
	change := func(t *testing.T) string {
		t.Helper()
		old := s.row(t, spec.Agent).ContainerID
		spec.Memory += 16 << 20
		if spec.Memory < 256<<20 {
			spec.Memory = 256 << 20
		}
		s.configure(t, spec)
		return old
	}
	t.Run("same spec", func(t *testing.T) {
		old := s.row(t, spec.Agent).ContainerID
		s.configure(t, spec)
		if pending, err := s.h.Backend.Sync(ctx, spec); err != nil || pending {
			t.Fatalf("pending %v, %v", pending, err)
		}
		if now := s.row(t, spec.Agent).ContainerID; now != old {
			t.Fatalf("an unchanged spec made the sandbox anew: %s → %s", old, now)
		}
	})
	t.Run("changed, idle", func(t *testing.T) {
		old := change(t)
		if pending, err := s.h.Backend.Sync(ctx, spec); err != nil || pending {
			t.Fatalf("pending %v, %v: an idle sandbox is made anew at once", pending, err)
		}
		if now := s.row(t, spec.Agent); now.ContainerID == old || now.State != sandbox.StateRunning {
			t.Fatalf("status after Sync: %+v (it was %s)", now, old)
		}
		if r := must(t, s.sandbox(t, spec.Agent), "cat", "/workspace/kept"); r.stdout != "kept\n" {
			t.Fatalf("the workspace: %q", r.stderr)
		}
	})
	t.Run("changed, a call in flight", func(t *testing.T) {
		sb := s.sandbox(t, spec.Agent)
		id := fmt.Sprintf("inflight-%d", time.Now().UnixNano())
		release, pw := io.Pipe()
		first := make(chan result, 1)
		go func() {
			first <- run(ctx, sb, gateway.ExecSpec{Argv: []string{"sh", "-c", "read x; echo finished $x"}, CallID: id, Stdin: release})
		}()
		waitForCall(t, sb, id)
		old := change(t)
		if pending, err := s.h.Backend.Sync(ctx, spec); err != nil || !pending {
			t.Fatalf("pending %v, %v: the call in flight holds the recreate back", pending, err)
		}
		next := make(chan result, 1)
		go func() {
			sb, err := s.h.Backend.Sandbox(ctx, spec.Agent)
			if err != nil {
				next <- result{err: err}
				return
			}
			next <- run(ctx, sb, gateway.ExecSpec{Argv: []string{"cat", "/workspace/kept"}})
		}()
		select {
		case r := <-next:
			t.Fatalf("a new call ran beside the call in flight, before the recreate: %+v %v", r, r.err)
		case r := <-first:
			t.Fatalf("the call in flight was cut: %+v %v", r.out, r.err)
		case <-time.After(time.Second):
		}
		fmt.Fprintln(pw, "go")
		pw.Close()
		if r := <-first; r.err != nil || r.out.ExitCode != 0 || r.stdout != "finished go\n" {
			t.Fatalf("the call in flight: %v %+v %q", r.err, r.out, r.stdout)
		}
		if r := <-next; r.err != nil || r.stdout != "kept\n" {
			t.Fatalf("the call after it: %v %q", r.err, r.stderr)
		}
		if now := s.row(t, spec.Agent); now.ContainerID == old || now.State != sandbox.StateRunning {
			t.Fatalf("status after the recreate: %+v (it was %s)", now, old)
		}
	})
}

// up: Up brings new sandboxes up in the background; done is closed once
// they are; their sockets are known.
func (s *suite) up(t *testing.T) {
	spec := s.h.Spec(t, "up")
	s.configure(t, spec)
	select {
	case <-s.h.Backend.Up(context.Background(), []sandbox.AgentSpec{spec}):
	case <-time.After(3 * time.Minute):
		t.Fatal("Up did not end")
	}
	if st := s.row(t, spec.Agent); st.State != sandbox.StateRunning || st.ContainerID == "" {
		t.Fatalf("status after Up: %+v", st)
	}
	socks := s.h.Backend.Sockets([]sandbox.AgentSpec{spec})
	if len(socks) != 1 || socks[0].Agent != spec.Agent || !path.IsAbs(socks[0].Path) || path.Base(socks[0].Path) != proto.SocketName ||
		socks[0].UID != 1000 || socks[0].GID != 1000 {
		t.Fatalf("sockets: %+v", socks)
	}
	if r := must(t, s.sandbox(t, spec.Agent), "true"); r.out.ExitCode != 0 {
		t.Fatalf("%+v", r.out)
	}
}
