package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Standing is a tool whose calls hold a way out open while they run (an
// egress tunnel). Policy allowed such a call on what its session had been
// given then; while it runs, the gateway decides it again each time the
// agent's sessions are given a new label, and ends it when policy no
// longer allows it — so an agent cannot open a tunnel first and write
// what it reads later into it.
type Standing interface {
	HoldsOpen() bool
}

// RevokedError is why a standing call was ended: the label that changed
// its session, and the decision policy now makes.
type RevokedError struct {
	Labels   []string // what the giver gave
	Giver    string   // the call that gave them
	Decision Decision // policy's decision now
}

func (e *RevokedError) Error() string {
	return fmt.Sprintf("ended: call %s gave the session %s, and policy no longer allows this call (%s by %s: %s)",
		e.Giver, strings.Join(e.Labels, ", "), e.Decision.Verdict(), e.Decision.Rule, e.Decision.Reason)
}

// standing are the calls running that hold a way out open, by agent.
type standing struct {
	mu      sync.Mutex
	byAgent map[string]map[string]*held // call id → held
}

type held struct {
	call   Call // as decided, copied before it ran: the tool may write the original
	snap   *Snapshot
	cancel context.CancelCauseFunc
}

// hold registers a call of a Standing tool for as long as it runs.
func (g *Gateway) hold(ctx context.Context, snap *Snapshot, call *Call, tool Tool) (context.Context, func()) {
	s, ok := tool.(Standing)
	if !ok || !s.HoldsOpen() || g.opts.Sessions == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	h := &held{call: *call, snap: snap, cancel: cancel}
	g.standing.mu.Lock()
	if g.standing.byAgent == nil {
		g.standing.byAgent = map[string]map[string]*held{}
	}
	m := g.standing.byAgent[call.Agent]
	if m == nil {
		m = map[string]*held{}
		g.standing.byAgent[call.Agent] = m
	}
	m[call.ID] = h
	g.standing.mu.Unlock()
	return ctx, func() {
		g.standing.mu.Lock()
		delete(m, call.ID)
		g.standing.mu.Unlock()
		cancel(nil)
	}
}

// recheck decides again every standing call of the agent whose session was
// just given labels by giver, and ends those policy no longer allows. It
// runs before the giver does: a tunnel is shut before the file is read.
func (g *Gateway) recheck(giver *Call, labels []string) {
	g.standing.mu.Lock()
	var hs []*held
	for id, h := range g.standing.byAgent[giver.Agent] {
		if id != giver.ID {
			hs = append(hs, h)
		}
	}
	g.standing.mu.Unlock()
	for _, h := range hs {
		c := h.call
		c.SessionFacts = g.opts.Sessions.Facts(&c)
		if d := h.snap.Decider.Decide(&c); !d.Allow {
			h.cancel(&RevokedError{Labels: labels, Giver: giver.ID, Decision: d})
		}
	}
}
