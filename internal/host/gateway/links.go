package gateway

import (
	"maps"
	"sync"
)

// A call's session and parent are hints from whoever sent it (for a
// sandbox, what its processes chose to send): for correlation, never for
// authority. A session is one agent's — entries of two agents naming the
// same session are two sessions, and every reader draws them apart
// (internal/host/calltree) — so a session hint needs no check here. A parent
// hint does: one naming a call of another agent would graft this call
// into that agent's tree. The gateway remembers which agent each recent
// call is, and records such a hint in the entry's detail, unlinked,
// instead of as its parent. A hint naming a call it no longer remembers
// (older, or from before a restart) is recorded as sent; the readers'
// rule still keeps it out of the other agent's tree.

// DetailUnlinkedParent is the detail key of a parent hint the gateway did
// not link because it named a call of another agent.
const DetailUnlinkedParent = "unlinkedParent"

// maxLinks bounds the calls remembered: two generations of this many
// (a few MiB at most), the calls of the last minutes on a busy gateway.
const maxLinks = 1 << 15

// links remembers the agent of each recent call.
type links struct {
	mu       sync.Mutex
	cur, old map[string]string // call id → agent
}

func (l *links) remember(id, agent string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil || len(l.cur) >= maxLinks {
		l.old, l.cur = l.cur, make(map[string]string, maxLinks)
	}
	l.cur[id] = agent
}

func (l *links) agentOf(id string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.cur[id]; ok {
		return a, true
	}
	a, ok := l.old[id]
	return a, ok
}

// unlink clears *parent when it names a call the gateway knows to be
// another agent's than agent, and keeps the hint in *detail (a copy: the
// caller's map may be shared) under DetailUnlinkedParent.
func (l *links) unlink(agent string, parent *string, detail *map[string]any) {
	if *parent == "" {
		return
	}
	if owner, ok := l.agentOf(*parent); !ok || owner == agent {
		return
	}
	*detail = maps.Clone(*detail)
	if *detail == nil {
		*detail = map[string]any{}
	}
	(*detail)[DetailUnlinkedParent] = *parent
	*parent = ""
}
