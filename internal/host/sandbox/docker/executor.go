package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
)

// errNoExecutor is wrapped by every failure that left the call unrun: no
// executor, a refused connection, a refused request. The Engine exec runs it.
var errNoExecutor = hostexec.ErrNoExecutor

// viaExecutor runs req on the warm executor. Errors wrapping errNoExecutor
// mean nothing ran. timeout is the call's own (the executor enforces it);
// the host closes the connection killGrace later if it has not ended.
func (s *Sandbox) viaExecutor(ctx context.Context, req *proto.ExecRequest, stdin io.Reader, stdout, stderr io.Writer, timeout time.Duration) (*gateway.ExecOutcome, error) {
	_, spec := s.h.Current()
	uid, _, _ := sandbox.ParseUser(spec.UserOrDefault())
	leave, waited, err := s.h.Admit(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	out, err := hostexec.Run(ctx, spec.ExecDir(), uid, req, stdin, stdout, stderr, timeout)
	if err == nil {
		out.Queued = waited
	}
	if err == nil || errors.Is(err, errNoExecutor) {
		return out, err
	}
	switch {
	case ctx.Err() != nil:
		if req.CallID != "" {
			// The executor kills the group when the connection goes,
			// unless it does not see it go (blocked feeding stdin, or
			// wedged): the host ends it too, so the tree is gone, with
			// or without stdin, when the call returns.
			s.killCall(ctx, req.CallID)
		}
		return nil, ctx.Err()
	case errors.Is(err, hostexec.ErrOvertime):
		if req.CallID != "" {
			s.killCall(ctx, req.CallID)
		}
		_, _ = fmt.Fprintf(stderr, "toolgate: command did not end %s after its timeout; killed\n", killGrace)
		return &gateway.ExecOutcome{ExitCode: 124, TimedOut: true}, nil
	case !errors.Is(err, hostexec.ErrLost):
		return nil, err
	}
	stopped, eerr := s.stopping(ctx)
	if stopped {
		s.h.MarkStale()
		return nil, fmt.Errorf("sandbox container for agent %s stopped during the call: %w", s.agent, sandbox.ErrGone)
	}
	if eerr != nil {
		return nil, fmt.Errorf("exec: %v, and %w", err, eerr)
	}
	return nil, fmt.Errorf("exec: %w", err)
}
