package egress

import (
	"errors"
	"fmt"
	"sync"
)

// ErrTooManyConnections is wrapped by Acquire's refusal.
var ErrTooManyConnections = errors.New("too many egress connections")

// Limiter caps each agent's concurrent egress connections.
type Limiter struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

// NewLimiter allows at most max concurrent connections per agent.
func NewLimiter(max int) *Limiter {
	return &Limiter{max: max, open: map[string]int{}}
}

// Acquire takes a slot for agent or refuses when all are in use. Every
// successful Acquire must be paired with one Release.
func (l *Limiter) Acquire(agent string) error { return l.AcquireMax(agent, l.max) }

// AcquireMax is Acquire with the agent's own limit (agents' limits differ,
// and the counts outlive a configuration reload that changes them).
func (l *Limiter) AcquireMax(agent string, max int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[agent] >= max {
		return fmt.Errorf("%w: agent %q already has %d open (limit %d)", ErrTooManyConnections, agent, l.open[agent], max)
	}
	l.open[agent]++
	return nil
}

// Release returns a slot taken by Acquire.
func (l *Limiter) Release(agent string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch n := l.open[agent]; {
	case n <= 0:
		panic("egress: Limiter.Release without Acquire for " + agent)
	case n == 1:
		delete(l.open, agent) // idle agents cost nothing
	default:
		l.open[agent] = n - 1
	}
}

// Open returns the agent's connections in use (metrics, tests).
func (l *Limiter) Open(agent string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[agent]
}
