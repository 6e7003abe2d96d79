package launcher_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/host/door/agentsock/sockettest"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/cclient/cclienttest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// launch runs the built launcher as /tools/bin/NAME runs it.
func launch(t *testing.T, env *sockettest.Env, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary(t), args...)
	cmd.Args[0] = "/tools/bin/" + name
	cmd.Env = append(os.Environ(), "TOOLGATE_SOCKET="+env.SocketPath("a"), "TOOLGATE_CALL_ID=exec-1")
	cmd.Dir = env.GW.Snapshot().Agents["a"].Workspace
	return cmd
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
		{"literal argv", "echo", []string{`"q"`, "a\nb", "$(id)", ";", "`x`", "<&>", "\u2028", "\x01", "é"}, "", 0, "\"q\" a\nb $(id) ; `x` <&> \u2028 \x01 é\n", ""},
		{"invalid UTF-8 argv", "echo", []string{"a\xffb"}, "", 0, "a\ufffdb\n", ""},
		{"no arguments", "echo", nil, "", 0, "\n", ""},
		{"stdin streamed", "cat", nil, strings.Repeat("0123456789", 10000), 3, strings.Repeat("0123456789", 10000), "to stderr\n"},
		{"unknown tool", "secret", nil, "", proto.LaunchExitNotFound, "", "toolgate: secret: not_found (tool.unknown; audit id "},
		{"tool error", "fail", nil, "", proto.LaunchExitSoftware, "", "toolgate: fail: tool_error: handler broke\n"},
		{"bad name", "a b", nil, "", proto.LaunchExitUsage, "", `toolgate: invalid tool name "a b"`},
		{"bad name, control", "a\x01", nil, "", proto.LaunchExitUsage, "", `toolgate: invalid tool name "a\x01"`},
		{"dot dot", "..", nil, "", proto.LaunchExitUsage, "", `toolgate: invalid tool name ".."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := launch(t, env, tt.tool, tt.args...)
			if tt.stdin != "" {
				cmd.Stdin = strings.NewReader(tt.stdin)
			}
			code, out, errOut := cclienttest.Run(t, cmd)
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
		cmd := launch(t, env, "hang")
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
		cmd := launch(t, env, "hang")
		var e bytes.Buffer
		cmd.Stderr = &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		env.Server.Close()
		_ = cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != proto.LaunchExitUnavailable || !strings.Contains(e.String(), "toolgate: hang: connection to the gateway lost before it answered (gateway restarting?): EOF") {
			t.Fatalf("exit %d: %s", code, e.String())
		}
	})
	t.Run("gateway down", func(t *testing.T) {
		code, _, errOut := cclienttest.Run(t, launch(t, env, "echo"))
		want := "toolgate: echo: gateway unavailable at " + env.SocketPath("a") + ": connect: no such file or directory\n"
		if code != proto.LaunchExitUnavailable || errOut != want {
			t.Fatalf("exit %d: %q, want %q", code, errOut, want)
		}
	})
}

func TestLaunchDenied(t *testing.T) {
	env := sockettest.New(t, sockettest.Allowlist{"a": {}})
	env.UseHostWorkspaces(t)
	env.Serve(t, "a")
	code, _, errOut := cclienttest.Run(t, launch(t, env, "echo", "x"))
	if code != proto.LaunchExitDenied || !strings.Contains(errOut, "toolgate: echo: denied (tools.allowlist; audit id ") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// A cwd outside the workspace is refused by the gateway as a bad request.
func TestLaunchCwdOutside(t *testing.T) {
	env := sockettest.New(t, sockettest.Allowlist{"a": {"echo"}})
	env.UseHostWorkspaces(t)
	env.Serve(t, "a")
	cmd := launch(t, env, "echo", "x")
	cmd.Dir = t.TempDir()
	code, _, errOut := cclienttest.Run(t, cmd)
	if code != proto.LaunchExitUsage || !strings.Contains(errOut, "outside the workspace") {
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

// The call streams only input that may still have something: a terminal
// or /dev/null never, input already at its end neither (a plain request),
// ready input starting with what it read, a pipe with nothing yet always.
func TestStdinStart(t *testing.T) {
	// peek says whether the call streamed stdin and reads argv[0] bytes of it.
	env := sockettest.New(t, sockettest.Allowlist{"a": {"peek"}},
		&sockettest.Func{ToolName: "peek", Fn: func(_ context.Context, call *gateway.Call, s *gateway.Streams) (*gateway.Result, error) {
			if s.Stdin == nil {
				_, err := io.WriteString(s.Stdout, "plain")
				return &gateway.Result{}, err
			}
			n, _ := strconv.Atoi(call.Argv[0])
			b := make([]byte, n)
			if _, err := io.ReadFull(s.Stdin, b); err != nil {
				return nil, err
			}
			_, err := fmt.Fprintf(s.Stdout, "stream:%s", b)
			return &gateway.Result{}, err
		}})
	env.UseHostWorkspaces(t)
	env.Serve(t, "a")
	pipe := func(t *testing.T, data string, closeW bool) (*os.File, *os.File) {
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
		return r, w
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
	only := func(r, _ *os.File) *os.File { return r }
	tests := []struct {
		name  string
		stdin func(t *testing.T) *os.File // nil: closed
		read  int
		want  string
	}{
		{"/dev/null", func(t *testing.T) *os.File { return nil }, 0, "plain"},
		{"closed fd", nil, 0, "plain"},
		{"empty pipe at its end", func(t *testing.T) *os.File { return only(pipe(t, "", true)) }, 0, "plain"},
		{"empty file", func(t *testing.T) *os.File { return file(t, "") }, 0, "plain"},
		{"pipe with data, writer done", func(t *testing.T) *os.File { return only(pipe(t, "abc", true)) }, 3, "stream:abc"},
		{"pipe with data, writer open", func(t *testing.T) *os.File { return only(pipe(t, "abc", false)) }, 3, "stream:abc"},
		{"pipe with nothing yet", func(t *testing.T) *os.File { return only(pipe(t, "", false)) }, 0, "stream:"},
		{"file", func(t *testing.T) *os.File { return file(t, "xyz") }, 3, "stream:xyz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cmd *exec.Cmd
			if tt.stdin == nil {
				// The shell closes fd 0, then runs the launcher as "peek".
				link := filepath.Join(t.TempDir(), "peek")
				if err := os.Symlink(binary(t), link); err != nil {
					t.Fatal(err)
				}
				cmd = exec.Command("/bin/sh", "-c", `exec "$0" "$1" <&-`, link, strconv.Itoa(tt.read))
				cmd.Env = append(os.Environ(), "TOOLGATE_SOCKET="+env.SocketPath("a"))
				cmd.Dir = env.GW.Snapshot().Agents["a"].Workspace
			} else {
				cmd = launch(t, env, "peek", strconv.Itoa(tt.read))
				if f := tt.stdin(t); f != nil {
					cmd.Stdin = f
				}
			}
			code, out, errOut := cclienttest.Run(t, cmd)
			if code != 0 || out != tt.want {
				t.Fatalf("exit %d, %q (%s); want %q", code, out, errOut, tt.want)
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
	cmd := launch(t, env, "cat")
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

// toolgate-client makes a plugin call by replacing itself with the
// launcher beside it: as `toolgate-client call NAME` and when run under a
// tool's name. With no launcher beside it, it says so.
func TestClientRunsTheLauncher(t *testing.T) {
	_, client := testenv.Binaries(t)
	env := sockettest.New(t, sockettest.Allowlist{"a": {"echo"}})
	env.UseHostWorkspaces(t)
	env.Serve(t, "a")
	alone := filepath.Join(t.TempDir(), "toolgate-client")
	b, err := os.ReadFile(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		argv       []string
		code       int
		stdout     string
		stderr     string
	}{
		{"call", client, []string{"toolgate-client", "call", "echo", "hi"}, 0, "hi\n", ""},
		{"as the tool", client, []string{"/tools/bin/echo", "hi"}, 0, "hi\n", ""},
		{"no launcher beside", alone, []string{"toolgate-client", "call", "echo", "hi"}, proto.LaunchExitUnavailable, "",
			"toolgate: echo: no launcher at " + filepath.Join(filepath.Dir(alone), "toolgate-launch") + ": no such file or directory\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.path, tc.argv[1:]...)
			cmd.Args[0] = tc.argv[0]
			cmd.Env = append(os.Environ(), "TOOLGATE_SOCKET="+env.SocketPath("a"))
			cmd.Dir = env.GW.Snapshot().Agents["a"].Workspace
			code, out, errOut := cclienttest.Run(t, cmd)
			if code != tc.code || out != tc.stdout || errOut != tc.stderr {
				t.Fatalf("got %d %q %q, want %d %q %q", code, out, errOut, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// With stdin, stdout or stderr closed the socket would take its number:
// the launcher moves it and opens /dev/null there, so the call is made and
// no output reaches the gateway as a request.
func TestClosedStdio(t *testing.T) {
	env := sockettest.New(t, sockettest.Allowlist{"a": {"echo"}})
	env.UseHostWorkspaces(t)
	env.Serve(t, "a")
	link := filepath.Join(t.TempDir(), "echo")
	if err := os.Symlink(binary(t), link); err != nil {
		t.Fatal(err)
	}
	for closed, want := range map[string]string{"<&-": "hi\n", ">&-": "", "2>&-": "hi\n", "<&- >&- 2>&-": ""} {
		t.Run(closed, func(t *testing.T) {
			// The shell prints the exit code on a descriptor it keeps.
			cmd := exec.Command("/bin/sh", "-c", `"$0" hi `+closed+`; echo $? >&3`, link)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd.ExtraFiles = []*os.File{w}
			cmd.Env = append(os.Environ(), "TOOLGATE_SOCKET="+env.SocketPath("a"))
			cmd.Dir = env.GW.Snapshot().Agents["a"].Workspace
			out, err := cmd.CombinedOutput()
			w.Close()
			code, _ := io.ReadAll(r)
			if err != nil || strings.TrimSpace(string(code)) != "0" || string(out) != want {
				t.Fatalf("%v: exit %q, output %q, want %q", err, code, out, want)
			}
		})
	}
}
