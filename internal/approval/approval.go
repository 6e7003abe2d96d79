// Package approval holds the calls a rule with `ask:` sent to a person:
// each waits, bounded, for an answer bound to that exact call (agent, tool
// and a hash of its arguments). A person lists them and answers with
// `toolgate approvals approve|deny ID`; no answer in time, or a gateway
// shutting down, is a denial. An approval may stand for a while (--for) for
// the same rule, or only for the same arguments (--same-args).
package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/gateway"
)

// DefaultTimeout is how long a call waits for a person when the agent does
// not say (agents.NAME.askTimeout).
const DefaultTimeout = 2 * time.Minute

// MaxPending bounds the calls waiting at once, per agent: a flood of asks
// is refused at once rather than held.
const MaxPending = 64

// callerMargin is how long before its caller's deadline a wait ends.
const callerMargin = 250 * time.Millisecond

// ErrNotFound: no call waits under that id (answered, timed out, or never asked).
var ErrNotFound = errors.New("no call waits for approval under that id")

// Pending is a call waiting for a person, with the facts policy saw.
type Pending struct {
	ID       string       `json:"id"`
	Agent    string       `json:"agent"`
	Kind     gateway.Kind `json:"kind"`
	Tool     string       `json:"tool"`
	Rule     string       `json:"rule"`
	Reason   string       `json:"reason"`
	ArgsHash string       `json:"args_sha256"`
	Args     string       `json:"args"` // as recorded (bounded)
	Command  string       `json:"command,omitempty"`
	Argv     []string     `json:"argv,omitempty"`
	Path     string       `json:"path,omitempty"`
	Host     string       `json:"host,omitempty"`
	Port     int          `json:"port,omitempty"`
	Session  string       `json:"session,omitempty"`
	Asked    time.Time    `json:"asked"`
	Deadline time.Time    `json:"deadline"`

	answer chan Answer
}

// Answer is a person's answer to one waiting call.
type Answer struct {
	Approve  bool          `json:"approve"`
	Reason   string        `json:"reason,omitempty"`
	For      time.Duration `json:"for,omitempty"`       // the approval stands this long
	SameArgs bool          `json:"same_args,omitempty"` // … only for identical arguments
	By       string        `json:"-"`                   // who answered: the door's identity, never the body's
}

// Store keeps the waiting calls and standing approvals. Safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	pending  map[string]*Pending
	standing []standing
	closed   bool
	now      func() time.Time
}

type standing struct {
	agent, rule, tool, argsHash string // argsHash "" for any arguments
	by                          string
	granted, until              time.Time
}

// New returns an empty store.
func New() *Store { return &Store{pending: map[string]*Pending{}, now: time.Now} }

var _ gateway.Approver = (*Store)(nil)

// Await implements gateway.Approver: it waits for a person's answer to
// call, until timeout, ctx's end, or Close — each of those a denial.
func (s *Store) Await(ctx context.Context, call *gateway.Call, dec gateway.Decision, timeout time.Duration) gateway.Approval {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	start := s.now()
	hash := ArgsHash(call)
	s.mu.Lock()
	if st, ok := s.standingFor(call, dec.Rule, hash, start); ok {
		s.mu.Unlock()
		what := "any arguments"
		if st.argsHash != "" {
			what = "the same arguments"
		}
		return gateway.Approval{Allow: true, Outcome: "standing", By: st.by, At: st.granted,
			Reason: fmt.Sprintf("approved by %s at %s for %s until %s", st.by, st.granted.UTC().Format(time.RFC3339), what, st.until.UTC().Format(time.RFC3339))}
	}
	if s.closed {
		s.mu.Unlock()
		return gateway.Approval{Outcome: "shutdown", At: start, Reason: "the gateway is shutting down"}
	}
	n := 0
	for _, p := range s.pending {
		if p.Agent == call.Agent {
			n++
		}
	}
	if n >= MaxPending {
		s.mu.Unlock()
		return gateway.Approval{Outcome: "refused", At: start, Reason: fmt.Sprintf("%d calls of agent %s already wait for a person", n, call.Agent)}
	}
	p := &Pending{ID: call.ID, Agent: call.Agent, Kind: call.Kind, Tool: call.Tool, Rule: dec.Rule, Reason: dec.Reason,
		ArgsHash: hash, Args: string(call.Args), Command: call.Command, Argv: call.Argv, Path: call.Path,
		Host: call.Host, Port: call.Port, Session: call.Session, Asked: start, Deadline: start.Add(timeout),
		answer: make(chan Answer, 1)}
	// Time out a moment before the caller's own deadline, so the denial is
	// recorded and answered while the caller still listens.
	if dl, ok := ctx.Deadline(); ok && dl.Add(-callerMargin).Before(p.Deadline) {
		p.Deadline = dl.Add(-callerMargin)
	}
	s.pending[p.ID] = p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, p.ID)
		s.mu.Unlock()
	}()

	t := time.NewTimer(p.Deadline.Sub(start))
	defer t.Stop()
	select {
	case a, ok := <-p.answer:
		at := s.now()
		if !ok {
			return gateway.Approval{Outcome: "shutdown", At: at, Waited: at.Sub(start), Reason: "the gateway shut down while the call waited"}
		}
		out := gateway.Approval{Allow: a.Approve, By: a.By, At: at, Waited: at.Sub(start)}
		if a.Approve {
			out.Outcome = "approved"
			out.Reason = fmt.Sprintf("approved by %s", a.By)
		} else {
			out.Outcome = "denied"
			out.Reason = fmt.Sprintf("denied by %s", a.By)
		}
		if a.Reason != "" {
			out.Reason += ": " + a.Reason
		}
		return out
	case <-t.C:
		at := s.now()
		return gateway.Approval{Outcome: "timeout", At: at, Waited: at.Sub(start),
			Reason: fmt.Sprintf("no one answered within %s", p.Deadline.Sub(start).Round(time.Second))}
	case <-ctx.Done():
		at := s.now()
		return gateway.Approval{Outcome: "cancelled", At: at, Waited: at.Sub(start), Reason: "the caller went away while the call waited"}
	}
}

func (s *Store) standingFor(call *gateway.Call, rule, hash string, now time.Time) (standing, bool) {
	s.standing = slices.DeleteFunc(s.standing, func(st standing) bool { return !now.Before(st.until) })
	for _, st := range s.standing {
		if st.agent == call.Agent && st.rule == rule && (st.argsHash == "" || (st.tool == call.Tool && st.argsHash == hash)) {
			return st, true
		}
	}
	return standing{}, false
}

// List returns the waiting calls, oldest first.
func (s *Store) List() []Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Pending, 0, len(s.pending))
	for _, p := range s.pending {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Pending) int { return a.Asked.Compare(b.Asked) })
	return out
}

// Answer delivers a person's answer to the call waiting under id. A
// standing approval (For > 0) is kept for the call's agent and rule (and
// tool and arguments, with SameArgs).
func (s *Store) Answer(id string, a Answer) error {
	if a.For < 0 || a.For > 30*24*time.Hour {
		return fmt.Errorf("an approval stands for at most 30 days, not %s", a.For)
	}
	if (a.For > 0 || a.SameArgs) && !a.Approve {
		return errors.New("--for and --same-args go with approve")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[id]
	if !ok {
		return ErrNotFound
	}
	delete(s.pending, id)
	if a.For > 0 {
		st := standing{agent: p.Agent, rule: p.Rule, by: a.By, granted: s.now(), until: s.now().Add(a.For)}
		if a.SameArgs {
			st.tool, st.argsHash = p.Tool, p.ArgsHash
		}
		s.standing = append(s.standing, st)
	}
	p.answer <- a
	return nil
}

// Close denies every waiting call (the gateway is shutting down) and any
// that asks later.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for id, p := range s.pending {
		close(p.answer)
		delete(s.pending, id)
	}
}

// ArgsHash is the SHA-256 of a call's normalised arguments (JSON with
// sorted keys and no insignificant space), so the same call spelled with
// other whitespace or key order is the same call.
func ArgsHash(call *gateway.Call) string {
	var v any
	norm := []byte(strings.TrimSpace(string(call.Args)))
	if json.Unmarshal(call.Args, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			norm = b
		}
	}
	h := sha256.New()
	h.Write([]byte(call.Agent + "\x00" + call.Tool + "\x00"))
	h.Write(norm)
	return hex.EncodeToString(h.Sum(nil))
}
