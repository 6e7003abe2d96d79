package gateway

import (
	"fmt"
	"sync"
	"time"
)

// Refusals are coalesced per source so that nobody can fill the audit disk
// with them: in every interval a source's first RefusalBurst refusals are
// recorded one entry each, and the rest are counted into one entry of rule
// RuleRefusalsCoalesced, written when the interval ends. Nothing is
// dropped from the record; a flood costs one entry per interval.
const (
	DefaultRefusalBurst = 10
	DefaultRefusalEvery = 10 * time.Second
	// RuleRefusalsCoalesced is the rule of the entry counting a source's
	// refusals beyond the burst of one interval.
	RuleRefusalsCoalesced = "refusals.coalesced"

	maxRefusalSources = 1024 // sources tracked at once; the rest share one
	maxRefusalSamples = 4    // distinct reasons kept in a coalesced entry
	otherSources      = "(other sources)"
)

// refusals counts refusals per source and interval.
type refusals struct {
	burst int
	every time.Duration

	mu      sync.Mutex
	sources map[string]*refusalWindow
}

// refusalWindow is one source's current interval.
type refusalWindow struct {
	start    time.Time
	recorded int // refusals recorded one by one in this interval

	// The refusals beyond the burst, recorded together at the end.
	id          string // the coalesced entry's id, given to every refusal it counts
	count       int
	first, last time.Time
	agent, via  string
	kind        Kind
	samples     []RefusalSample
	timer       *time.Timer
}

// RefusalSample is one distinct refusal a coalesced entry counted.
type RefusalSample struct {
	Rule   string `json:"rule"`
	Tool   string `json:"tool,omitempty"`
	Reason string `json:"reason"`
}

func newRefusals(burst int, every time.Duration) *refusals {
	if burst <= 0 {
		burst = DefaultRefusalBurst
	}
	if every <= 0 {
		every = DefaultRefusalEvery
	}
	return &refusals{burst: burst, every: every, sources: map[string]*refusalWindow{}}
}

// admit decides whether the refusal e from source is recorded on its own
// (true) or counted into its source's coalesced entry, whose id it then
// returns. flush is called with the window's key when a coalesced window's
// interval ends.
func (r *refusals) admit(source string, e *Entry, flush func(key string)) (bool, string) {
	key := e.Via + "\x00" + source
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.sources[key]
	if w != nil && w.count == 0 && e.TS.Sub(w.start) >= r.every {
		delete(r.sources, key) // an interval that ended with nothing to write
		w = nil
	}
	if w == nil {
		if len(r.sources) >= maxRefusalSources {
			r.sweep(e.TS)
		}
		if len(r.sources) >= maxRefusalSources {
			key = e.Via + "\x00" + otherSources
			w = r.sources[key]
		}
		if w == nil {
			w = &refusalWindow{start: e.TS}
			r.sources[key] = w
		}
	}
	if w.recorded < r.burst {
		w.recorded++
		return true, ""
	}
	if w.count == 0 {
		w.id, w.first = NewID(), e.TS
		w.agent, w.via, w.kind = e.Agent, e.Via, e.Type
		w.timer = time.AfterFunc(w.start.Add(r.every).Sub(e.TS), func() { flush(key) })
	}
	w.count++
	w.last = e.TS
	if len(w.samples) < maxRefusalSamples {
		s := RefusalSample{Rule: e.Rule, Tool: e.Tool, Reason: e.Reason}
		seen := false
		for _, have := range w.samples {
			seen = seen || have == s
		}
		if !seen {
			w.samples = append(w.samples, s)
		}
	}
	return false, w.id
}

// sweep forgets ended intervals that have nothing to write.
func (r *refusals) sweep(now time.Time) {
	for k, w := range r.sources {
		if w.count == 0 && now.Sub(w.start) >= r.every {
			delete(r.sources, k)
		}
	}
}

// take removes the window of key (every window when key is empty) and
// returns those with refusals to write.
func (r *refusals) take(key string, all bool) map[string]*refusalWindow {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*refusalWindow{}
	for k, w := range r.sources {
		if !all && k != key {
			continue
		}
		delete(r.sources, k)
		if w.timer != nil {
			w.timer.Stop()
		}
		if w.count > 0 {
			out[k] = w
		}
	}
	return out
}

// flushRefusals writes the coalesced entry of one source's ended interval.
func (g *Gateway) flushRefusals(key string) {
	for k, w := range g.refusals.take(key, false) {
		g.writeCoalesced(k, w)
	}
}

// FlushRefusals writes every coalesced refusal count now, without waiting
// for its interval to end. Wait calls it, so a shutdown loses no count.
func (g *Gateway) FlushRefusals() {
	for k, w := range g.refusals.take("", true) {
		g.writeCoalesced(k, w)
	}
}

func (g *Gateway) writeCoalesced(key string, w *refusalWindow) {
	source := key[len(w.via)+1:]
	e := g.bounded(&Entry{
		TS:       time.Now().UTC(),
		ID:       w.id,
		Phase:    PhaseDecision,
		Agent:    w.agent,
		Type:     w.kind,
		Via:      w.via,
		Decision: (Decision{}).Verdict(),
		Rule:     RuleRefusalsCoalesced,
		Reason:   fmt.Sprintf("%d refusals from %s coalesced: over %d in %s", w.count, source, g.refusals.burst, g.refusals.every),
		Detail:   map[string]any{"source": source, "count": w.count, "first": w.first, "last": w.last, "samples": w.samples},
	})
	if err := g.opts.Audit.Append(e); err != nil {
		g.opts.Logger.Error("audit append of coalesced refusals failed", "source", source, "count", w.count, "err", err)
	}
}
