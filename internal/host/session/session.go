// Package session keeps what each session's calls gave it: the labels of
// the agent's session.labels that its allowed calls matched (private,
// untrusted, external …), each with the call that gave it first, and how
// many calls it made. Policy reads them (session.labels in a rule), so a
// call can be decided on the sequence it would complete — private data
// read, untrusted content taken in, then a way out — not on itself alone.
//
// The audit log is the truth: every allowed decision entry that gave
// labels names them in its detail, so Rebuild recovers the labels after a
// restart; a reload keeps the Tracker (the daemon owns it).
package session

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// MaxSessions bounds the sessions kept per agent. Session hints come from
// the agent, so past this the least recently used session is forgotten;
// every session's labels stay in the agent's own scope, which is never
// forgotten (the default scope, see config's session.scope).
const MaxSessions = 4096

// Tracker holds every agent's sessions. It implements gateway.Sessions
// and is safe for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	agents   map[string]*agentState
	tick     uint64                // orders uses, for forgetting the least recent session
	budgets  map[[2]string]*budget // open tasks by agent and session (budget.go)
	defaults map[string]config.SessionBudget
}

type agentState struct {
	all      scope
	sessions map[string]*scope
}

// scope is one session's (or an agent's) facts. labels is never written
// once published: a new label replaces the map, so Facts hands it out
// without copying.
type scope struct {
	labels map[string]gateway.Label
	calls  int
	cost   float64
	tokens int64
	used   uint64
}

var _ gateway.Sessions = (*Tracker)(nil)

// New returns an empty tracker.
func New() *Tracker {
	return &Tracker{agents: map[string]*agentState{}, budgets: map[[2]string]*budget{}}
}

// Facts implements gateway.Sessions.
func (t *Tracker) Facts(call *gateway.Call) *gateway.SessionFacts {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := &gateway.SessionFacts{ID: call.Session}
	a := t.agents[call.Agent]
	if a == nil {
		return f
	}
	f.Agent = gateway.ScopeFacts{Labels: a.all.labels, Calls: a.all.calls, Cost: a.all.cost, Tokens: a.all.tokens}
	if s := a.sessions[call.Session]; s != nil {
		t.tick++
		s.used = t.tick
		f.Labels, f.Calls, f.Cost, f.Tokens = s.labels, s.calls, s.cost, s.tokens
	}
	return f
}

// Give implements gateway.Sessions: the call's labels (dec.Labels) go to
// its session and its agent, unless they have them already.
func (t *Tracker) Give(call *gateway.Call, dec gateway.Decision) bool {
	// When the call was made, from its id: a replayed call's is its own.
	at, ok := api.IDTime(call.ID)
	if !ok {
		at = time.Now()
	}
	giver := gateway.Label{Call: call.ID, At: at.UTC(), Tool: call.Tool, Kind: call.Kind, Target: call.Target()}
	return t.give(call.Agent, call.Session, dec.Labels, giver, true)
}

// give reports whether the agent's scope got a label it did not have.
func (t *Tracker) give(agent, session string, labels []string, giver gateway.Label, count bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.agentLocked(agent)
	s := a.sessionLocked(t, session)
	if count {
		s.calls++
		a.all.calls++
	}
	fresh := s.add(labels, giver)
	return a.all.add(labels, giver) || fresh
}

func (s *scope) add(labels []string, giver gateway.Label) bool {
	var next map[string]gateway.Label
	for _, l := range labels {
		if _, ok := s.labels[l]; ok {
			continue
		}
		if next == nil {
			next = make(map[string]gateway.Label, len(s.labels)+len(labels))
			for k, v := range s.labels {
				next[k] = v
			}
		}
		next[l] = giver
	}
	if next != nil {
		s.labels = next
	}
	return next != nil
}

func (t *Tracker) agentLocked(agent string) *agentState {
	a := t.agents[agent]
	if a == nil {
		a = &agentState{sessions: map[string]*scope{}}
		t.agents[agent] = a
	}
	return a
}

// sessionLocked is the session's scope, made (and marked used) if need be.
func (a *agentState) sessionLocked(t *Tracker, session string) *scope {
	s := a.sessions[session]
	if s == nil {
		if len(a.sessions) >= MaxSessions {
			a.forgetOldest()
		}
		s = &scope{}
		a.sessions[session] = s
	}
	t.tick++
	s.used = t.tick
	return s
}

func (a *agentState) forgetOldest() {
	var oldest string
	var at uint64
	first := true
	for id, s := range a.sessions {
		if first || s.used < at {
			oldest, at, first = id, s.used, false
		}
	}
	delete(a.sessions, oldest)
}

// ToolClear is the tool of the entry that records a clear of an agent's
// labels (kind admin, decision cleared).
const ToolClear = "session.labels.clear"

// Clear takes every label from the agent and all its sessions: a person
// who looked has decided the agent starts afresh. The caller records it
// first (an entry Rebuild reads as the same clear).
func (t *Tracker) Clear(agent string) map[string]gateway.Label {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.agents[agent]
	if a == nil {
		return nil
	}
	was := a.all.labels
	a.all.labels = nil
	for _, s := range a.sessions {
		s.labels = nil
	}
	return was
}

// Rebuild gives the tracker the labels recorded in the audit log in dir:
// those of every allowed decision entry that names labels, oldest first,
// so each label's giver is the call that gave it first, less what a clear
// entry took away. It reads only the lines that may hold either. Calls
// are not counted again: session.calls counts since the gateway started.
func (t *Tracker) Rebuild(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil // no log yet: nothing was given
	}
	return audit.Query(dir, audit.Filter{Has: `labels`}, func(e *gateway.Entry) error {
		if e.Type == gateway.KindAdmin && e.Tool == ToolClear && e.Decision == gateway.VerdictCleared {
			t.Clear(e.Agent)
			return nil
		}
		if labels, target := Given(e); len(labels) > 0 {
			t.give(e.Agent, e.Session, labels, gateway.Label{Call: e.ID, At: e.TS, Tool: e.Tool, Kind: e.Type, Target: target}, false)
		}
		return nil
	})
}

// Given is what an entry says its call gave its session: the labels of an
// allowed decision entry (detail.labels) and the target they came from
// (detail.target); nothing for any other entry.
func Given(e *gateway.Entry) (labels []string, target string) {
	if e.Phase != gateway.PhaseDecision || e.Decision != gateway.VerdictAllow {
		return nil, ""
	}
	list, _ := e.Detail["labels"].([]any)
	for _, l := range list {
		if s, ok := l.(string); ok && s != "" {
			labels = append(labels, s)
		}
	}
	target, _ = e.Detail["target"].(string)
	return labels, target
}
