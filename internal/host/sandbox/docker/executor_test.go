package docker

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

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// executorPid finds the executor inside the sandbox (through the Engine).
func executorPid(t *testing.T, sb *Sandbox) int {
	t.Helper()
	var ps bytes.Buffer
	if code, _, err := sb.runEngine(context.Background(), []string{"ps", "-o", "pid,args"}, nil, &ps, &hostexec.CapWriter{Max: 4096}); err != nil || code != 0 {
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
	if code, msg, err := sb.runEngine(ctx, []string{"kill", "-KILL", strconv.Itoa(old)}, nil, nil, &hostexec.CapWriter{Max: 4096}); err != nil || code != 0 {
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
	accepted := probe.ListenCounting(t, victim)
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

// A sandbox Ensure has just started is up when it returns: its executor
// answers (and with it init's egress and model forwarders listen), so the
// first call neither falls back to an Engine exec nor finds no proxy. The
// sandbox's client here is a script that lets a second pass before it runs
// the real one (from the workspace), as a loaded machine might.
func TestEnsureWaitsForTheExecutor(t *testing.T) {
	slow := filepath.Join(t.TempDir(), "slow-client")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 1\nexec /workspace/toolgate-client \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, _ := newAgent(t)
	ctx := context.Background()
	if err := testMgr.Remove(ctx, spec.Agent); err != nil {
		t.Fatal(err)
	}
	real, err := os.ReadFile(testClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spec.Workspace, "toolgate-client"), real, 0o755); err != nil {
		t.Fatal(err)
	}
	spec.ClientBinary = slow
	if _, err := testMgr.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	c, err := hostexec.Dial(ctx, spec.ExecDir(), 1000)
	if err != nil {
		out, _ := exec.Command("docker", "logs", testMgr.ContainerName(spec.Agent)).CombinedOutput()
		t.Fatalf("Ensure returned before the executor answered: %v\n%s", err, out)
	}
	c.Close()
}

// A running sandbox whose host directories were deleted and made again at
// the same paths (a removed toolgate home, then a fresh start) cannot see
// the new ones: Ensure makes it anew rather than re-attach it, and calls
// work and land in the new workspace.
func TestEnsureRecreatesWhenItsDirectoriesAreNew(t *testing.T) {
	spec, sb := newAgent(t)
	ctx := context.Background()
	old, _ := sb.h.Current()
	if err := os.RemoveAll(filepath.Dir(spec.Workspace)); err != nil {
		t.Fatal(err)
	}
	sb, err := testMgr.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := sb.h.Current(); id == old {
		t.Fatal("re-attached a container whose directories are gone")
	}
	r := mustRun(t, sb, "sh", "-c", "echo fresh > /workspace/f.txt && cat /workspace/f.txt")
	if r.stdout != "fresh\n" {
		t.Fatalf("a call in the new sandbox: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(spec.Workspace, "f.txt")); err != nil || string(b) != "fresh\n" {
		t.Fatalf("the file in the new workspace: %q %v", b, err)
	}
}
