package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
)

// Sandbox is one agent's pod. The handle stays valid across recreations:
// it always points at the agent's current pod.
type Sandbox struct {
	m     *Manager
	agent string
	calls sandbox.Calls // in flight; held back while the pod is replaced
	h     sandbox.Handle[podRef]
}

// podRef names a pod: its name, and its UID, which a recreated pod of the
// same name does not share.
type podRef struct {
	name string
	uid  types.UID
}

var (
	_ gateway.Sandbox      = (*Sandbox)(nil)
	_ gateway.StreamWriter = (*Sandbox)(nil)
	_ gateway.StreamReader = (*Sandbox)(nil)
)

// Pod is the agent's current pod: its name and UID.
func (s *Sandbox) Pod() (string, types.UID) {
	r := s.h.Ref()
	return r.name, r.uid
}

// current is the agent's current pod and the spec it was made from.
func (s *Sandbox) current() (string, types.UID, sandbox.AgentSpec) {
	r, spec := s.h.Current()
	return r.name, r.uid, spec
}

// Exec runs spec.Argv with the in-sandbox client's semantics (its own
// process group; timeout and kill apply to the whole tree): on the warm
// executor when it answers, else through pods/exec. A stale sandbox (its
// pod deleted under an earlier call) is brought back first.
func (s *Sandbox) Exec(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("exec: empty argv")
	}
	callID := spec.CallID
	if callID == "" {
		callID = gateway.NewID()
	}
	if !proto.ValidCallID(callID) {
		return nil, fmt.Errorf("exec: invalid call id %q", callID)
	}
	leave, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	_, _, box := s.current()
	env := append(slices.Clip(spec.Env), box.CallEnv(callID, spec.Session)...)
	req := &proto.ExecRequest{Argv: spec.Argv, Cwd: spec.Cwd, Env: env, CallID: callID}
	if spec.Timeout > 0 {
		req.Timeout = spec.Timeout.String()
	}
	stdout, stderr := spec.Outputs()
	out, err := s.viaExecutor(ctx, req, spec.Stdin, stdout, stderr, spec.Timeout)
	if !errors.Is(err, hostexec.ErrNoExecutor) {
		return out, err
	}
	s.m.log.Debug("sandbox executor not used; exec through pods/exec", "agent", s.agent, "reason", err)
	return s.execPod(ctx, sandbox.RunArgv(callID, spec.Timeout, spec.Cwd, env, spec.Argv), callID, spec.Stdin, stdout, stderr, spec.Timeout)
}

// ExecThroughAPI is Exec through pods/exec only, skipping the executor:
// the fallback path, and the baseline the executor is measured against.
func (s *Sandbox) ExecThroughAPI(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
	callID := cmp.Or(spec.CallID, gateway.NewID())
	_, _, box := s.current()
	env := append(slices.Clip(spec.Env), box.CallEnv(callID, spec.Session)...)
	stdout, stderr := spec.Outputs()
	return s.execPod(ctx, sandbox.RunArgv(callID, spec.Timeout, spec.Cwd, env, spec.Argv), callID, spec.Stdin, stdout, stderr, spec.Timeout)
}

// enter brings back the pod of a sandbox marked stale (Sync: not under
// calls in flight) or lost between calls, then counts a call in it,
// waiting while its pod is replaced.
func (s *Sandbox) enter(ctx context.Context) (leave func(), err error) {
	if !s.h.Stale() && s.volumeGone() {
		s.h.MarkStale() // deleted while idle: nothing of this call has run yet
	}
	if s.h.Stale() {
		_, _, spec := s.current()
		if cur, ok := s.m.spec(s.agent); ok {
			spec = cur // a reload may have changed it
		}
		if _, err := s.m.Sync(ctx, spec); err != nil {
			return nil, err
		}
	}
	if err := s.calls.Enter(ctx); err != nil {
		return nil, err
	}
	return s.calls.Leave, nil
}

// volumeGone reports whether the current pod's exec volume has left this
// node: the kubelet removes it once the pod is deleted, so a pod lost
// between calls is noticed by a stat, not a question to the API server.
func (s *Sandbox) volumeGone() bool {
	_, uid, _ := s.current()
	if uid == "" {
		return false
	}
	_, err := os.Stat(s.m.VolumeDir(uid, VolExec))
	return errors.Is(err, fs.ErrNotExist)
}

// viaExecutor runs req on the warm executor in the pod's exec volume.
func (s *Sandbox) viaExecutor(ctx context.Context, req *proto.ExecRequest, stdin io.Reader, stdout, stderr io.Writer, timeout time.Duration) (*gateway.ExecOutcome, error) {
	_, uid, spec := s.current()
	user, _, _ := sandbox.ParseUser(spec.UserOrDefault())
	leave, waited, err := s.h.Admit(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	out, err := hostexec.Run(ctx, s.m.VolumeDir(uid, VolExec), user, req, stdin, stdout, stderr, timeout)
	if err == nil {
		out.Queued = waited
	}
	if err == nil || errors.Is(err, hostexec.ErrNoExecutor) {
		return out, err
	}
	switch {
	case ctx.Err() != nil:
		if req.CallID != "" {
			s.killCall(ctx, req.CallID)
		}
		return nil, ctx.Err()
	case errors.Is(err, hostexec.ErrOvertime):
		s.killCall(ctx, req.CallID)
		_, _ = fmt.Fprintf(stderr, "toolgate: command did not end %s after its timeout; killed\n", hostexec.KillGrace)
		return &gateway.ExecOutcome{ExitCode: 124, TimedOut: true}, nil
	case !errors.Is(err, hostexec.ErrLost):
		return nil, err
	}
	return nil, s.lost(ctx, err)
}

// lost turns a broken call into the error it is: the pod gone (marked
// stale, recreated on the next call) or just the connection.
func (s *Sandbox) lost(ctx context.Context, err error) error {
	if gerr := s.gone(ctx); gerr != nil {
		return gerr
	}
	return fmt.Errorf("exec in the sandbox of agent %s: %w", s.agent, err)
}

// gone is the error of a call whose pod went away, nil while it runs.
func (s *Sandbox) gone(ctx context.Context) error {
	gone, why := s.podGone(ctx)
	if !gone {
		return nil
	}
	s.h.MarkStale()
	return fmt.Errorf("sandbox pod of agent %s %s: %w", s.agent, why, sandbox.ErrGone)
}

// podGone asks the API server whether the pod the call ran in is going or
// gone. The kubelet may report the pod's end a moment after the call
// broke off, so this waits briefly for it.
func (s *Sandbox) podGone(ctx context.Context) (bool, string) {
	name, uid, _ := s.current()
	for i := 0; i < 10; i++ {
		pod, err := s.m.cs.CoreV1().Pods(s.m.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, "was deleted"
		case err != nil:
			return false, ""
		case pod.UID != uid:
			return true, "was replaced"
		case pod.DeletionTimestamp != nil:
			return true, "is being deleted"
		case !running(pod):
			return true, "stopped (" + waitingReason(pod) + ")"
		}
		select {
		case <-ctx.Done():
			return false, ""
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false, ""
}

// execPod runs argv through the pods/exec subresource. timeout is the
// call's own (the in-sandbox client enforces it); KillGrace past it the
// host ends the call itself.
func (s *Sandbox) execPod(ctx context.Context, argv []string, callID string, stdin io.Reader, stdout, stderr io.Writer, timeout time.Duration) (*gateway.ExecOutcome, error) {
	callCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, timeout+hostexec.KillGrace)
		defer cancel()
	}
	// The caller's writer failing is its own error (the pod is fine: no
	// asking the API server whether it went), and the call is ended, as
	// nobody reads it any more. client-go only logs a failed writer and
	// streams on until the command ends: the stream is cancelled instead.
	streamCtx, stopStream := context.WithCancel(callCtx)
	defer stopStream()
	so := &hostexec.FailedWriter{W: stdout, OnFail: stopStream}
	se := &hostexec.FailedWriter{W: stderr, OnFail: stopStream}
	start := time.Now()
	code, err := s.stream(streamCtx, argv, stdin, so, se)
	if werr := cmp.Or(so.Err, se.Err); werr != nil {
		s.killCall(ctx, callID)
		return nil, werr
	}
	if err == nil && code >= 128 {
		// Killed by a signal: perhaps with its pod.
		if gerr := s.gone(ctx); gerr != nil {
			return nil, gerr
		}
	}
	switch {
	case err == nil:
		// 124 is also a command's own code: a timeout only once it passed.
		return &gateway.ExecOutcome{ExitCode: code, TimedOut: timeout > 0 && code == 124 && time.Since(start) >= timeout}, nil
	case ctx.Err() != nil:
		s.killCall(ctx, callID)
		return nil, ctx.Err()
	case callCtx.Err() != nil:
		s.killCall(ctx, callID)
		_, _ = fmt.Fprintf(stderr, "toolgate: command did not end %s after its timeout; killed\n", hostexec.KillGrace)
		return &gateway.ExecOutcome{ExitCode: 124, TimedOut: true}, nil
	}
	return nil, s.lost(ctx, err)
}

// stream is one pods/exec of argv: WebSocket, SPDY when the server does
// not upgrade to it. A non-zero exit is a code, not an error.
func (s *Sandbox) stream(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	name, _, _ := s.current()
	req := s.m.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.m.ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: Container, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(s.m.cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return 0, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(s.m.cfg, http.MethodPost, req.URL())
	if err != nil {
		return 0, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// killCall ends a call's process group. It runs even when ctx is already
// cancelled: the caller is gone, the process must go too.
func (s *Sandbox) killCall(ctx context.Context, callID string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hostexec.KillGrace)
	defer cancel()
	_, _, _ = s.run(kctx, sandbox.KillArgv(callID), nil, nil)
}

// run executes a short helper argv (get, put, kill) on the warm executor,
// else through pods/exec; a hostexec.Runner.
func (s *Sandbox) run(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	errBuf := &hostexec.CapWriter{Max: 4096}
	if stdout == nil {
		stdout = errBuf
	}
	// Nothing of stdin is read when the executor is not there (ErrNoExecutor).
	out, err := s.viaExecutor(ctx, &proto.ExecRequest{Argv: argv, CallID: gateway.NewID()}, stdin, stdout, errBuf, 0)
	if err == nil {
		return out.ExitCode, errBuf.Stderr(), nil
	}
	if !errors.Is(err, hostexec.ErrNoExecutor) {
		return 0, "", err
	}
	code, err := s.stream(ctx, argv, stdin, stdout, errBuf)
	if err != nil {
		return 0, "", s.lost(ctx, err)
	}
	return code, errBuf.Stderr(), nil
}

// ReadFile reads a file through `toolgate-client get` inside the pod.
func (s *Sandbox) ReadFile(ctx context.Context, p string, limit int64) (*gateway.File, error) {
	leave, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	return hostexec.ReadFile(ctx, s.run, p, limit)
}

// WriteFile atomically replaces a file through `toolgate-client put` inside the pod.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	leave, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	return hostexec.WriteFile(ctx, s.run, p, data)
}

// WriteFileFrom is WriteFile with the content streamed and hashed on its
// way (gateway.StreamWriter).
func (s *Sandbox) WriteFileFrom(ctx context.Context, p string, r io.Reader, size int64, want *[32]byte) ([32]byte, error) {
	leave, err := s.enter(ctx)
	if err != nil {
		return [32]byte{}, err
	}
	defer leave()
	return hostexec.WriteFileFrom(ctx, s.run, p, r, size, want)
}

// ReadFileTo is ReadFile streamed to w (gateway.StreamReader).
func (s *Sandbox) ReadFileTo(ctx context.Context, p string, limit int64, check func(*gateway.File) error, w io.Writer) (*gateway.File, error) {
	leave, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	return hostexec.ReadFileTo(ctx, s.run, p, limit, check, w)
}
