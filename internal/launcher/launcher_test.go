package launcher

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/agentsock/sockettest"
	"github.com/toolgate/toolgate/internal/gateway"
)

// The test binary doubles as the launcher when run under a tool's name.
func TestMain(m *testing.M) {
	if os.Getenv("TOOLGATE_LAUNCHER_TEST") == "1" {
		os.Exit(Launch(filepath.Base(os.Args[0]), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// launcher runs the test binary as /tools/bin/NAME would run the client.
func launcher(env *sockettest.Env, name string, args ...string) *exec.Cmd {
	sock := env.SocketPath("a")
	cmd := exec.Command(os.Args[0], args...)
	cmd.Args[0] = "/tools/bin/" + name
	cmd.Env = append(os.Environ(), "TOOLGATE_LAUNCHER_TEST=1", "TOOLGATE_SOCKET="+sock, "TOOLGATE_CALL_ID=exec-1")
	cmd.Dir = env.GW.Snapshot().Agents["a"].Workspace
	return cmd
}

func runLauncher(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

func TestLaunch(t *testing.T) {
	started := make(chan struct{}, 1)
	env := sockettest.New(t, sockettest.Allowlist{"a": {"echo", "cat", "fail", "hang"}},
		&sockettest.Func{ToolName: "cat", Fn: func(_ context.Context, _ *gateway.Call, s *gateway.Streams) (*gateway.Result, error) {
			_, _ = io.WriteString(s.Stderr, "to stderr\n")
			_, err := io.Copy(s.Stdout, s.Stdin)
			code := 3
			return &gateway.Result{ExitCode: &code}, err
		}},
		&sockettest.Func{ToolName: "fail", Fn: func(context.Context, *gateway.Call, *gateway.Streams) (*gateway.Result, error) {
			return nil, errors.New("handler broke")
		}},
		&sockettest.Func{ToolName: "hang", Fn: func(ctx context.Context, _ *gateway.Call, _ *gateway.Streams) (*gateway.Result, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}})
	env.UseHostWorkspaces(t)
	env.Serve(t, "a")
	tests := []struct {
		name, tool     string
		args           []string
		stdin          string
		code           int
		stdout, stderr string
	}{
		{"echo", "echo", []string{"hi"}, "", 0, "hi\n", ""},
		{"literal argv", "echo", []string{`"q"`, "a\nb", "$(id)", ";", "`x`"}, "", 0, "\"q\" a\nb $(id) ; `x`\n", ""},
		{"stdin streamed", "cat", nil, strings.Repeat("0123456789", 10000), 3, strings.Repeat("0123456789", 10000), "to stderr\n"},
		{"denied", "secret", nil, "", ExitNotFound, "", "not_found (tool.unknown"},
		{"tool error", "fail", nil, "", ExitSoftware, "", "handler broke"},
		{"bad name", "a b", nil, "", ExitUsage, "", "invalid tool name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := launcher(env, tt.tool, tt.args...)
			if tt.stdin != "" {
				cmd.Stdin = strings.NewReader(tt.stdin)
			}
			code, out, errOut := runLauncher(t, cmd)
			if code != tt.code || out != tt.stdout || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("got %d %.80q %q, want %d %.80q ~%q", code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
	for _, e := range env.Entries(t) {
		if e.Phase == gateway.PhaseDecision && e.Parent != "exec-1" {
			t.Errorf("entry %s: parent %q, want the exec's call id", e.Tool, e.Parent)
		}
	}

	t.Run("signal cancels", func(t *testing.T) {
		cmd := launcher(env, "hang")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		// It dies of the signal, as a program without handlers does (a
		// shell reports 128+15).
		if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("ended with %v, want killed by SIGTERM", cmd.ProcessState)
		}
		waitResult(t, env, "hang", "context canceled")
	})
	t.Run("gateway gone mid-call", func(t *testing.T) {
		cmd := launcher(env, "hang")
		var e bytes.Buffer
		cmd.Stderr = &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		env.Server.Close()
		_ = cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != ExitUnavailable || !strings.Contains(e.String(), "gateway restarting") {
			t.Fatalf("exit %d: %s", code, e.String())
		}
	})
	t.Run("gateway down", func(t *testing.T) {
		code, _, errOut := runLauncher(t, launcher(env, "echo"))
		if code != ExitUnavailable || !strings.Contains(errOut, "gateway unavailable") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

func TestLaunchDenied(t *testing.T) {
	env := sockettest.New(t, sockettest.Allowlist{"a": {}})
	env.UseHostWorkspaces(t)
	env.Serve(t, "a")
	code, _, errOut := runLauncher(t, launcher(env, "echo", "x"))
	if code != ExitDenied || !strings.Contains(errOut, "denied (tools.allowlist") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// waitResult waits for the result entry of tool (appended just after the
// handler returns; bounded by the test timeout) and checks its error.
func waitResult(t *testing.T, env *sockettest.Env, tool, errPart string) {
	t.Helper()
	for {
		for _, e := range env.Entries(t) {
			if e.Tool == tool && e.Phase == gateway.PhaseResult {
				if !strings.Contains(e.Error, errPart) {
					t.Fatalf("result entry error %q, want ~%q", e.Error, errPart)
				}
				return
			}
		}
	}
}

// stdinStart streams only input that may still have something: a terminal
// or /dev/null never, input already at its end neither (a plain request),
// ready input starting with what it read, a pipe with nothing yet always.
func TestStdinStart(t *testing.T) {
	pipe := func(t *testing.T, data string, closeW bool) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		if _, err := w.WriteString(data); err != nil {
			t.Fatal(err)
		}
		if closeW {
			w.Close()
		}
		return r
	}
	file := func(t *testing.T, data string) *os.File {
		p := filepath.Join(t.TempDir(), "in")
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	closed := pipe(t, "", true)
	closed.Close()
	tests := []struct {
		name   string
		f      *os.File
		first  string
		stream bool
	}{
		{"/dev/null", devNull, "", false},
		{"closed fd", closed, "", false},
		{"empty pipe at its end", pipe(t, "", true), "", false},
		{"empty file", file(t, ""), "", false},
		{"pipe with data, writer done", pipe(t, "abc", true), "abc", true},
		{"pipe with data, writer open", pipe(t, "abc", false), "abc", true},
		{"pipe with nothing yet", pipe(t, "", false), "", true},
		{"file", file(t, "xyz"), "xyz", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, stream := stdinStart(tt.f)
			if string(first) != tt.first || stream != tt.stream {
				t.Fatalf("got %q %v, want %q %v", first, stream, tt.first, tt.stream)
			}
		})
	}
}

// Input that arrives only after the launcher started still reaches the
// tool, whole: the call streams it.
func TestLaunchLateStdin(t *testing.T) {
	env := sockettest.New(t, sockettest.Allowlist{"a": {"cat"}},
		&sockettest.Func{ToolName: "cat", Fn: func(_ context.Context, _ *gateway.Call, s *gateway.Streams) (*gateway.Result, error) {
			_, err := io.Copy(s.Stdout, s.Stdin)
			return &gateway.Result{}, err
		}})
	env.UseHostWorkspaces(t)
	env.Serve(t, "a")
	cmd := launcher(env, "cat")
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("late input\n", 10000)
	if _, err := io.WriteString(w, want); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := cmd.Wait(); err != nil || o.String() != want {
		t.Fatalf("%v: %d bytes back of %d; %s", err, o.Len(), len(want), e.String())
	}
}

// Whatever the gateway answers, the launcher returns an exit code: no
// panic, no hang on a body that ends early.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n{\"stdout\":\"aGkK\"}\n\r\n1b\r\n{\"result\":{\"exitCode\":3}}\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n{\"result\":{\"exitCode\":0}}\n",
		"HTTP/1.1 403 Forbidden\r\nContent-Length: 62\r\n\r\n{\"error\":{\"code\":\"denied\",\"rule\":\"r\",\"message\":\"no\",\"id\":\"x\"}}",
		"HTTP/1.1 200 OK\r\n\r\n{\"error\":{\"code\":\"denied\"}}\n",
		"HTTP/1.1 200 OK\r\n\r\n{\"stderr\":\"eA==\"}\n{\"result\":{\"error\":\"boom\"}}\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 500\r\n\r\nnot json",
		"HTTP/1.1 200 OK\r\n\r\n{\"result\":{\"exitCode\":300}}\n",
		"HTTP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n",
		"garbage",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		code := readResponse("t", bufio.NewReader(bytes.NewReader(b)), io.Discard, io.Discard)
		if code < 0 || code > 255 {
			t.Fatalf("exit code %d", code)
		}
	})
}
