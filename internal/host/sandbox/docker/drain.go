package docker

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/host/sandbox"
)

// Sync is Ensure for a configuration reload. A container that must be
// recreated while calls run in it is recreated once they have finished —
// new calls wait for the new container — or, at the latest, after the
// spec's drain bound (its exec timeout and the kill grace), cutting what
// still runs. pending reports a recreate left waiting for calls in flight.
func (m *Manager) Sync(ctx context.Context, spec sandbox.AgentSpec) (pending bool, err error) {
	if err := spec.Validate(); err != nil {
		return false, err
	}
	b, lock := m.agents.Register(spec)
	// A sandbox not up yet is starting from here: a call that comes while
	// another brings it up waits for that (Manager.Sandbox).
	b.boot.begin()
	keep := func() (bool, error) {
		keep, err := m.keeps(ctx, spec)
		if err != nil {
			if st, _ := b.boot.state(); st != "" {
				b.boot.end(notStarted(spec.Agent, err))
			}
		}
		return keep, err
	}
	// The newest spec: a reload may have come meanwhile.
	ensure := func(ctx context.Context) error {
		spec, ok := m.spec(b.agent)
		if !ok {
			return fmt.Errorf("agent %q: %w", b.agent, sandbox.ErrNotConfigured)
		}
		return m.ensureBox(ctx, b, lock, spec)
	}
	return b.calls.Resync(ctx, keep, ensure, spec.DrainBound(killGrace), m.log, spec.Agent)
}
