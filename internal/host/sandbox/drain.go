package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// DefaultDrain bounds the wait for calls in flight when a spec names none.
const DefaultDrain = 10 * time.Minute

// recreateWait bounds a recreate made in the background, once the calls
// in flight have finished.
const recreateWait = 5 * time.Minute

// ErrNotConfigured is wrapped by the error of an agent no longer (or never)
// configured.
var ErrNotConfigured = errors.New("no sandbox configured")

// Calls counts the calls running in a sandbox and holds new ones back while
// it is made anew: a reload recreates a sandbox only once it is idle, never
// under a call. The zero value is ready.
type Calls struct {
	mu      sync.Mutex
	running int
	held    chan struct{} // non-nil while a recreate waits or runs; closed when done
	idle    chan struct{} // closed when running drops to 0 while held
}

// Enter waits while the sandbox is being made anew, then counts a call;
// Leave ends it.
func (c *Calls) Enter(ctx context.Context) error {
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

// Leave ends a call Enter counted.
func (c *Calls) Leave() {
	c.mu.Lock()
	c.running--
	if c.running == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// Running is how many calls run in the sandbox now.
func (c *Calls) Running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// hold stops new calls from starting; idle is closed once none runs. ok is
// false when a hold is in place already.
func (c *Calls) hold() (idle <-chan struct{}, ok bool) {
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
func (c *Calls) release() {
	c.mu.Lock()
	close(c.held)
	c.held, c.idle = nil, nil
	c.mu.Unlock()
}

// Resync is Backend.Sync's part every backend shares. It holds new calls
// back (they wait in Enter) and brings the sandbox in line with ensure: at
// once when no call runs in it, or when keep reports that ensure cuts none
// (the sandbox stays as it is); otherwise — pending — in the background,
// once the calls in flight have finished or, at the latest, after bound,
// cutting what still runs. A Resync while another is under way is pending
// too: that one's ensure takes the newest spec. ensure returns an error
// wrapping ErrNotConfigured when the agent has left the configuration.
func (c *Calls) Resync(ctx context.Context, keep func() (bool, error), ensure func(context.Context) error, bound time.Duration, log *slog.Logger, agent string) (pending bool, err error) {
	idle, ok := c.hold()
	if !ok {
		return true, nil
	}
	select {
	case <-idle:
		defer c.release()
		return false, ensure(ctx)
	default:
	}
	if kept, err := keep(); err != nil || kept {
		// Keeping it (or failing to ask) cuts nothing.
		c.release()
		if err != nil {
			return false, err
		}
		return false, ensure(ctx)
	}
	go func() {
		defer c.release()
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
			log.Warn("sandbox recreated with calls still running: the drain bound passed, they are cut", "agent", agent, "bound", bound.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), recreateWait)
		defer cancel()
		switch err := ensure(ctx); {
		case errors.Is(err, ErrNotConfigured): // the agent left the configuration meanwhile
		case err != nil:
			log.Error("recreating a sandbox after a reload", "agent", agent, "err", err)
		default:
			log.Info("sandbox recreated after a reload", "agent", agent)
		}
	}()
	return true, nil
}

// DrainBound is how long a reload waits for a sandbox's calls in flight:
// the spec's Drain (its exec timeout) and grace, DefaultDrain when it
// names none.
func (s AgentSpec) DrainBound(grace time.Duration) time.Duration {
	if s.Drain <= 0 {
		return DefaultDrain
	}
	return s.Drain + grace
}
