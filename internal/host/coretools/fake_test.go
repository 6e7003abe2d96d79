package coretools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// fakeSandbox maps sandbox paths onto a temp dir (so "/etc/passwd" is
// ROOT/etc/passwd, as the container would see its own) and runs argv on the
// host with os/exec. Good enough to test the tools; Docker is tested elsewhere.
type fakeSandbox struct {
	root   string
	execs  []*gateway.ExecSpec
	queued time.Duration // what each exec says it waited for its turn
}

func newFake(t testing.TB) *fakeSandbox {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &fakeSandbox{root: root}
}

func (f *fakeSandbox) host(p string) string { return filepath.Join(f.root, filepath.FromSlash(p)) }

func (f *fakeSandbox) ReadFile(_ context.Context, p string, limit int64) (*gateway.File, error) {
	fh, err := os.Open(f.host(p))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, errors.New("is a directory")
	}
	data, err := io.ReadAll(io.LimitReader(fh, limit))
	if err != nil {
		return nil, err
	}
	return &gateway.File{Path: p, Size: st.Size(), Mode: uint32(st.Mode()), Data: data}, nil
}

func (f *fakeSandbox) WriteFile(_ context.Context, p string, data []byte) error {
	h := f.host(p)
	if err := os.MkdirAll(filepath.Dir(h), 0o755); err != nil {
		return err
	}
	tmp := h + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, h)
}

func (f *fakeSandbox) Exec(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
	f.execs = append(f.execs, spec)
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = f.host(spec.Cwd)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "TOOLGATE_CALL_ID=" + spec.CallID}, spec.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	oc := &gateway.ExecOutcome{TimedOut: ctx.Err() == context.DeadlineExceeded, Queued: f.queued}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		oc.ExitCode = ee.ExitCode()
	case err != nil && !oc.TimedOut:
		return nil, err
	}
	return oc, nil
}

var testAgent = gateway.AgentInfo{Name: "demo", Workspace: "/workspace"}

// harness runs calls through Prepare and Run as the gateway would.
type harness struct {
	t      testing.TB
	sb     *fakeSandbox
	limits config.Limits
	tools  map[string]gateway.Tool
}

func newHarness(t testing.TB, limits config.Limits) *harness {
	h := &harness{t: t, sb: newFake(t), limits: limits, tools: map[string]gateway.Tool{}}
	for _, tool := range New(func(agent string) config.Limits {
		if agent != testAgent.Name {
			t.Errorf("limits asked for agent %q", agent)
		}
		return h.limits
	}, nil) {
		h.tools[tool.Name()] = tool
	}
	return h
}

// prepare returns the prepared call or Prepare's error.
func (h *harness) prepare(tool string, args string) (*gateway.Call, error) {
	call := &gateway.Call{ID: "call-1", Agent: testAgent.Name, Tool: tool, Args: json.RawMessage(args)}
	return call, h.tools[tool].Prepare(call, testAgent)
}

// call prepares and runs; io may be nil.
func (h *harness) call(tool, args string, io *gateway.Streams) (*gateway.Result, error) {
	h.t.Helper()
	call, err := h.prepare(tool, args)
	if err != nil {
		return nil, err
	}
	return h.tools[tool].Run(context.Background(), call, &gateway.RunEnv{Agent: testAgent, Sandbox: h.sb, IO: io})
}

func (h *harness) mustCall(tool, args string) *gateway.Result {
	h.t.Helper()
	res, err := h.call(tool, args, nil)
	if err != nil {
		h.t.Fatalf("%s %s: %v", tool, clip(args), err)
	}
	return res
}

func (h *harness) put(p, content string) {
	h.t.Helper()
	if err := h.sb.WriteFile(context.Background(), p, []byte(content)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) get(p string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.sb.host(p))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func jsonArgs(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
