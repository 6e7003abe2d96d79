// Package ratelimit limits an agent's allowed calls by tool or kind: calls
// per minute, calls running at once, egress bytes per day. A call over a
// limit is denied by the gateway with the limit as its reason, on the
// record like any denial.
//
// The Limiter is owned by the daemon and outlives reloads: a reload that
// keeps a limit keeps its counters, so an agent cannot reset its budget by
// waiting for a config change.
package ratelimit

import (
	"fmt"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Limiter implements gateway.Limiter. Safe for concurrent use.
type Limiter struct {
	mu       sync.Mutex
	rules    map[string][]config.Rate // agent → its rates
	counters map[key]*counter
	now      func() time.Time
}

// key names one counter: an agent's calls of one selector. Counters are
// per selector, not per limit value: changing perMinute keeps what was used.
type key struct{ agent, tool, kind string }

type counter struct {
	tokens   float64 // perMinute bucket
	refilled time.Time
	running  int
	day      string // UTC date the bytes count
	bytes    int64
}

// New returns a limiter with no limits.
func New() *Limiter {
	return &Limiter{rules: map[string][]config.Rate{}, counters: map[key]*counter{}, now: time.Now}
}

var _ gateway.Limiter = (*Limiter)(nil)

// Configure sets every agent's rates (on start and on each reload).
// Counters of selectors that remain are kept.
func (l *Limiter) Configure(cfg *config.Config) {
	rules := make(map[string][]config.Rate, len(cfg.Agents))
	for name, a := range cfg.Agents {
		if len(a.Rates) > 0 {
			rules[name] = a.Rates
		}
	}
	l.mu.Lock()
	l.rules = rules
	l.mu.Unlock()
}

func selects(r config.Rate, call *gateway.Call) bool {
	switch {
	case r.Tool != "":
		return r.Tool == call.Tool
	case r.Kind != "":
		return r.Kind == string(call.Kind)
	}
	return true
}

// Admit implements gateway.Limiter: it counts an allowed call against
// every rate that selects it, or refuses it with the first limit it is
// over (counting nothing). done ends the call: it frees its concurrency
// slot and charges egress bytes from the call's detail.
func (l *Limiter) Admit(call *gateway.Call) (done func(), denial *gateway.Decision) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rates := l.rules[call.Agent]
	if len(rates) == 0 {
		return func() {}, nil
	}
	now := l.now()
	var hit []*counter
	var hitRates []config.Rate
	for _, r := range rates {
		if !selects(r, call) {
			continue
		}
		c := l.counter(call.Agent, r, now)
		if d := over(r, c, now); d != "" {
			return nil, &gateway.Decision{Rule: "rate." + selector(r), Reason: fmt.Sprintf("agent %s: %s", call.Agent, d)}
		}
		hit = append(hit, c)
		hitRates = append(hitRates, r)
	}
	for i, c := range hit {
		if hitRates[i].PerMinute > 0 {
			c.tokens--
		}
		c.running++
	}
	return func() {
		n := egressBytes(call)
		l.mu.Lock()
		defer l.mu.Unlock()
		day := l.now().UTC().Format(time.DateOnly)
		for _, c := range hit {
			c.running--
			if n > 0 {
				if c.day != day {
					c.day, c.bytes = day, 0
				}
				c.bytes += n
			}
		}
	}, nil
}

func (l *Limiter) counter(agent string, r config.Rate, now time.Time) *counter {
	k := key{agent, r.Tool, r.Kind}
	c, ok := l.counters[k]
	if !ok {
		c = &counter{tokens: float64(r.PerMinute), refilled: now}
		l.counters[k] = c
	}
	if r.PerMinute > 0 {
		c.tokens = min(float64(r.PerMinute), c.tokens+now.Sub(c.refilled).Minutes()*float64(r.PerMinute))
	}
	c.refilled = now
	if day := now.UTC().Format(time.DateOnly); c.day != day {
		c.day, c.bytes = day, 0
	}
	return c
}

// over says which limit a call would break, "" when none.
func over(r config.Rate, c *counter, now time.Time) string {
	sel := "calls"
	if s := selector(r); s != "all" {
		sel = s + " calls"
	}
	switch {
	case r.PerMinute > 0 && c.tokens < 1:
		wait := time.Duration((1 - c.tokens) / float64(r.PerMinute) * float64(time.Minute)).Round(time.Second)
		return fmt.Sprintf("over %d %s per minute (next in %s)", r.PerMinute, sel, max(wait, time.Second))
	case r.Concurrent > 0 && c.running >= r.Concurrent:
		return fmt.Sprintf("%d %s already running (limit %d)", c.running, sel, r.Concurrent)
	case r.BytesPerDay > 0 && c.bytes >= r.BytesPerDay:
		midnight := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		return fmt.Sprintf("egress budget of %d bytes for today used up (%d bytes; resets in %s)", r.BytesPerDay, c.bytes, midnight.Sub(now).Round(time.Minute))
	}
	return ""
}

func selector(r config.Rate) string {
	switch {
	case r.Tool != "":
		return r.Tool
	case r.Kind != "":
		return r.Kind
	}
	return "all"
}

// egressBytes are the bytes a finished egress call moved, from the detail
// its tool records.
func egressBytes(call *gateway.Call) int64 {
	if call.Kind != gateway.KindEgress {
		return 0
	}
	var n int64
	for _, k := range []string{"bytesUp", "bytesDown"} {
		switch v := call.Detail[k].(type) {
		case int64:
			n += v
		case int:
			n += int64(v)
		case uint64:
			n += int64(v)
		case float64:
			n += int64(v)
		}
	}
	return n
}
