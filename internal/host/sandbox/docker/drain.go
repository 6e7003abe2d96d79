package docker

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/sandbox"
)

// defaultDrain bounds the wait for calls in flight when a spec names none.
const defaultDrain = 10 * time.Minute

// calls counts the calls running in a sandbox and holds new ones back while
// its container is replaced: a reload recreates a container only once it is
// idle, never under a call.
type calls struct {
	mu      sync.Mutex
	running int
	held    chan struct{} // non-nil while a recreate waits or runs; closed when done
	idle    chan struct{} // closed when running drops to 0 while held
}

// enter waits while the container is being replaced, then counts a call.
func (c *calls) enter(ctx context.Context) error {
	for {
		c.mu.Lock()
		held := c.held
		if held == nil {
			c.running++
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *calls) leave() {
	c.mu.Lock()
	c.running--
	if c.running == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// hold stops new calls from starting; idle is closed once none runs. ok is
// false when a hold is in place already.
func (c *calls) hold() (idle <-chan struct{}, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		return nil, false
	}
	c.held = make(chan struct{})
	ch := make(chan struct{})
	if c.running == 0 {
		close(ch)
	} else {
		c.idle = ch
	}
	return ch, true
}

// release lets the calls held back start.
func (c *calls) release() {
	c.mu.Lock()
	close(c.held)
	c.held, c.idle = nil, nil
	c.mu.Unlock()
}

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
	idle, ok := b.calls.hold()
	if !ok {
		return true, nil // a recreate or a bring-up is under way; it takes the newest spec
	}
	select {
	case <-idle:
		defer b.calls.release()
		return false, m.ensureBox(ctx, b, lock, spec)
	default:
	}
	if keep, err := m.keeps(ctx, spec); err != nil || keep {
		// Re-attaching (or failing to ask) cuts nothing.
		b.calls.release()
		if err != nil {
			if st, _ := b.boot.state(); st != "" {
				b.boot.end(notStarted(spec.Agent, err))
			}
			return false, err
		}
		return false, m.ensureBox(ctx, b, lock, spec)
	}
	go m.recreateWhenIdle(b, lock, idle, drainBound(spec))
	return true, nil
}

func drainBound(spec sandbox.AgentSpec) time.Duration {
	if spec.Drain <= 0 {
		return defaultDrain
	}
	return spec.Drain + killGrace
}

// recreateWhenIdle waits for the calls in flight (new ones are held), at
// most bound, then recreates the container from the newest spec.
func (m *Manager) recreateWhenIdle(b *Sandbox, lock *sync.Mutex, idle <-chan struct{}, bound time.Duration) {
	defer b.calls.release()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		m.log.Warn("sandbox recreated with calls still running: the drain bound passed, they are cut", "agent", b.agent, "bound", bound.String())
	}
	spec, ok := m.spec(b.agent)
	if !ok {
		return // the agent left the configuration meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := m.ensureBox(ctx, b, lock, spec); err != nil {
		m.log.Error("recreating a sandbox after a reload", "agent", b.agent, "err", err)
		return
	}
	m.log.Info("sandbox recreated after a reload", "agent", b.agent)
}
