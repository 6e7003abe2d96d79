package docker

import (
	"context"
	"io"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
)

// ReadFile reads a file through `toolgate-client get` inside the sandbox
// (hostexec.ReadFile): symlinks resolve in the container, never on the host.
func (s *Sandbox) ReadFile(ctx context.Context, p string, limit int64) (*gateway.File, error) {
	if err := hostexec.CheckAbs(p); err != nil {
		return nil, err
	}
	if err := s.calls.Enter(ctx); err != nil {
		return nil, err
	}
	defer s.calls.Leave()
	return hostexec.ReadFile(ctx, s.run, p, limit)
}

// WriteFile atomically replaces a file through `toolgate-client put` inside
// the sandbox (hostexec.WriteFile).
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	if err := hostexec.CheckAbs(p); err != nil {
		return err
	}
	if err := s.calls.Enter(ctx); err != nil {
		return err
	}
	defer s.calls.Leave()
	return hostexec.WriteFile(ctx, s.run, p, data)
}

// WriteFileFrom is WriteFile with the content streamed and hashed on its
// way (hostexec.WriteFileFrom).
func (s *Sandbox) WriteFileFrom(ctx context.Context, p string, r io.Reader, size int64, want *[32]byte) ([32]byte, error) {
	if err := hostexec.CheckAbs(p); err != nil {
		return [32]byte{}, err
	}
	if err := s.calls.Enter(ctx); err != nil {
		return [32]byte{}, err
	}
	defer s.calls.Leave()
	return hostexec.WriteFileFrom(ctx, s.run, p, r, size, want)
}

// ReadFileTo is ReadFile streamed to w (hostexec.ReadFileTo).
func (s *Sandbox) ReadFileTo(ctx context.Context, p string, limit int64, check func(*gateway.File) error, w io.Writer) (*gateway.File, error) {
	if err := hostexec.CheckAbs(p); err != nil {
		return nil, err
	}
	if err := s.calls.Enter(ctx); err != nil {
		return nil, err
	}
	defer s.calls.Leave()
	return hostexec.ReadFileTo(ctx, s.run, p, limit, check, w)
}
