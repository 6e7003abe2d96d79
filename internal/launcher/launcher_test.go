package launcher

import (
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
		if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit %d", code)
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
