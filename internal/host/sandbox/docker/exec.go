package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
)

// killGrace is how long the host waits past an exec's own timeout before it
// kills the call itself (the in-sandbox client normally does it first).
const killGrace = hostexec.KillGrace

// stopWait bounds how long an abnormally ended call waits to learn whether
// its container died.
const stopWait = 500 * time.Millisecond

// Sandbox is one agent's container. The handle stays valid across
// recreations: it always points at the agent's current container.
type Sandbox struct {
	m     *Manager
	agent string

	calls sandbox.Calls          // in flight; held back while the container is replaced
	boot  boot                   // whether the container is up; calls wait while it comes up
	h     sandbox.Handle[string] // the container's id
}

var _ gateway.Sandbox = (*Sandbox)(nil)

// ContainerID is the agent's current container.
func (s *Sandbox) ContainerID() string { return s.h.Ref() }

// Exec runs spec.Argv with the in-sandbox client's semantics: its own
// process group, the timeout and the kill apply to the whole tree. It goes
// to the warm executor when there is one, else through an Engine exec.
// Output streams to spec.Stdout/Stderr as it arrives; draining is
// unbounded (caps are the caller's writers' job).
func (s *Sandbox) Exec(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("exec: empty argv")
	}
	callID := spec.CallID
	if callID == "" {
		callID = gateway.NewID()
	}
	if !proto.ValidCallID(callID) {
		return nil, fmt.Errorf("exec: invalid call id %q", callID)
	}
	if err := s.calls.Enter(ctx); err != nil {
		return nil, err
	}
	defer s.calls.Leave()
	out, err := s.execExecutor(ctx, spec, callID)
	if !errors.Is(err, errNoExecutor) {
		return out, err
	}
	s.m.log.Debug("sandbox executor not used; exec through the Engine", "agent", s.agent, "reason", err)
	return s.execEngine(ctx, spec, callID)
}

// execExecutor is Exec on the warm executor.
func (s *Sandbox) execExecutor(ctx context.Context, spec *gateway.ExecSpec, callID string) (*gateway.ExecOutcome, error) {
	_, box := s.h.Current()
	req := &proto.ExecRequest{
		Argv:   spec.Argv,
		Cwd:    spec.Cwd,
		Env:    append(slices.Clip(spec.Env), box.CallEnv(callID, spec.Session)...),
		CallID: callID,
	}
	if spec.Timeout > 0 {
		req.Timeout = spec.Timeout.String()
	}
	stdout, stderr := spec.Outputs()
	return s.viaExecutor(ctx, req, spec.Stdin, stdout, stderr, spec.Timeout)
}

// execEngine is Exec through an Engine exec of `toolgate-client run`. The
// directory is run's to enter, as the executor enters it, so a missing one
// is reported the same way on both paths (the Engine's own chdir failure
// is an OCI runtime message on stdout).
func (s *Sandbox) execEngine(ctx context.Context, spec *gateway.ExecSpec, callID string) (*gateway.ExecOutcome, error) {
	_, box := s.h.Current()
	opts := client.ExecCreateOptions{
		Cmd:          sandbox.RunArgv(callID, spec.Timeout, spec.Cwd, nil, spec.Argv),
		Env:          append(slices.Clip(spec.Env), box.CallEnv(callID, spec.Session)...),
		AttachStdin:  spec.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	}
	// As on the executor path: the caller's writer failing is its own
	// error, not the output breaking off, and asks no stopping check.
	out, errOut := spec.Outputs()
	stdout, stderr := &hostexec.FailedWriter{W: out}, &hostexec.FailedWriter{W: errOut}
	start := time.Now()

	execID, att, err := s.start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer att.Close()
	if spec.Stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, spec.Stdin)
			_ = att.CloseWrite()
		}()
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		copied <- err
	}()
	var backstop <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout + killGrace)
		defer t.Stop()
		backstop = t.C
	}

	select {
	case copyErr := <-copied:
		if werr := cmp.Or(stdout.Err, stderr.Err); werr != nil {
			s.killCall(ctx, callID) // nobody reads its output: it must not go on unwatched
			return nil, werr
		}
		out, err := s.finish(ctx, execID, copyErr, spec.Timeout, time.Since(start))
		if err != nil && !errors.Is(err, sandbox.ErrGone) {
			// The output broke off (a failed writer, a lost stream)
			// with the call perhaps still running: it must not go on
			// unwatched.
			s.killCall(ctx, callID)
		}
		return out, err
	case <-ctx.Done():
		s.killCall(ctx, callID)
		att.Close()
		<-copied
		return nil, ctx.Err()
	case <-backstop:
		s.killCall(ctx, callID)
		att.Close()
		<-copied
		_, _ = fmt.Fprintf(stderr, "toolgate: command did not end %s after its timeout; killed\n", killGrace)
		return &gateway.ExecOutcome{ExitCode: 124, TimedOut: true}, nil
	}
}

// finish reads the exit code; an abnormal end is checked against the
// container so a dead sandbox is reported as such, not as an exit code.
func (s *Sandbox) finish(ctx context.Context, execID string, copyErr error, timeout, elapsed time.Duration) (*gateway.ExecOutcome, error) {
	res, err := s.m.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
	// The stream can end a moment before the Engine records the exit.
	for i := 0; err == nil && res.Running && i < 100; i++ {
		time.Sleep(5 * time.Millisecond)
		res, err = s.m.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
	}
	if copyErr != nil || err != nil || res.Running || res.ExitCode >= 128 || res.ExitCode < 0 {
		stopped, eerr := s.stopping(ctx)
		if stopped {
			s.h.MarkStale()
			return nil, fmt.Errorf("sandbox container for agent %s stopped during the call: %w", s.agent, sandbox.ErrGone)
		}
		if eerr != nil {
			return nil, fmt.Errorf("exec in the sandbox of agent %s: %w", s.agent, eerr)
		}
	}
	switch {
	case copyErr != nil:
		return nil, fmt.Errorf("exec: reading output: %w", copyErr)
	case err != nil:
		return nil, fmt.Errorf("exec: %w", err)
	case res.Running:
		return nil, fmt.Errorf("exec: output ended but the process is still running")
	}
	return &gateway.ExecOutcome{
		ExitCode: res.ExitCode,
		TimedOut: timeout > 0 && res.ExitCode == 124 && elapsed >= timeout,
	}, nil
}

// start creates and attaches an exec. If the container is gone or stopped
// it is brought back (same workspace) and the exec is tried once more.
func (s *Sandbox) start(ctx context.Context, opts client.ExecCreateOptions) (string, client.ExecAttachResult, error) {
	for attempt := 0; ; attempt++ {
		created, err := s.m.cli.ExecCreate(ctx, s.ContainerID(), opts)
		if err == nil {
			att, err := s.m.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
			if err != nil {
				return "", att, fmt.Errorf("exec: attach: %w", err)
			}
			return created.ID, att, nil
		}
		if attempt > 0 || !s.revive(ctx) {
			return "", client.ExecAttachResult{}, fmt.Errorf("exec in sandbox of agent %s: %w", s.agent, err)
		}
	}
}

// revive brings back a container that is not running after an operation on
// it failed. It reports whether the operation is worth retrying.
func (s *Sandbox) revive(ctx context.Context) bool {
	// Running, or an Engine that cannot say: nothing to bring back.
	if running, err := s.running(ctx); ctx.Err() != nil || running || err != nil {
		return false
	}
	_, spec := s.h.Current()
	if cur, ok := s.m.spec(s.agent); ok {
		spec = cur // a reload may have changed it
	}
	_, err := s.m.Ensure(ctx, spec)
	return err == nil
}

// stopping tells whether the container stopped or is about to: when it is
// killed, the Engine may report the exec's end a moment before the
// container's, so this waits briefly for the container's exit. Only calls
// that ended abnormally (killed by a signal) pay for it. An Engine that
// cannot be asked is an error, not a stopped container: the sandbox may be
// running and its warm executor answering.
func (s *Sandbox) stopping(ctx context.Context) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	w := s.m.cli.ContainerWait(wctx, s.ContainerID(), client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
		return true, nil
	case <-w.Error:
		running, err := s.running(ctx)
		return !running && err == nil, err
	}
}

// running asks the Engine whether the container runs. The error is an
// Engine that cannot be reached or does not answer in time (errEngine);
// any answer from it (no such container included) is not an error.
func (s *Sandbox) running(ctx context.Context) (bool, error) {
	ictx, cancel := context.WithTimeout(ctx, engineWait)
	defer cancel()
	res, err := s.m.cli.ContainerInspect(ictx, s.ContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		if ctx.Err() == nil && (client.IsErrConnectionFailed(err) || ictx.Err() != nil) {
			return false, s.m.unreachable(err)
		}
		return false, nil
	}
	return res.Container.State != nil && res.Container.State.Running, nil
}

// killCall ends a call's process group through a second exec. It runs even
// when ctx is already cancelled: the caller is gone, the process must go too.
func (s *Sandbox) killCall(ctx context.Context, callID string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
	defer cancel()
	if running, err := s.running(kctx); !running && err == nil {
		return // nothing left to kill; do not bring the sandbox back for it
	}
	_, _, _ = s.run(kctx, sandbox.KillArgv(callID), nil, nil)
}

// run executes a short helper argv (mkdir, mv, kill …) and returns its exit
// code and bounded stderr. Stdout goes to stdout (nil: kept with stderr).
// The warm executor runs it when there is one, else a bare Engine exec.
func (s *Sandbox) run(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	errBuf := &hostexec.CapWriter{Max: 4096}
	if stdout == nil {
		stdout = errBuf
	}
	out, err := s.viaExecutor(ctx, &proto.ExecRequest{Argv: argv, CallID: gateway.NewID()}, stdin, stdout, errBuf, 0)
	if err == nil {
		return out.ExitCode, errBuf.Stderr(), nil
	}
	if !errors.Is(err, errNoExecutor) {
		return 0, "", err
	}
	return s.runEngine(ctx, argv, stdin, stdout, errBuf)
}

// runEngine is run through a bare Engine exec.
func (s *Sandbox) runEngine(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer, errBuf *hostexec.CapWriter) (int, string, error) {
	execID, att, err := s.start(ctx, client.ExecCreateOptions{
		Cmd: argv, AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return 0, "", err
	}
	defer att.Close()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, stdin)
			_ = att.CloseWrite()
		}()
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, errBuf, att.Reader)
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		att.Close()
		<-copied
		return 0, "", ctx.Err()
	}
	out, ierr := s.finish(ctx, execID, err, 0, 0)
	if ierr != nil {
		return 0, "", ierr
	}
	return out.ExitCode, errBuf.Stderr(), nil
}
