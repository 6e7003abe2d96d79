// Package approval holds the calls a rule with `ask:` sent to a person:
// each waits, bounded, for an answer bound to that exact call — its agent,
// kind and tool and a digest of every byte it will use: its arguments and
// its whole input (Digest). A person lists them and answers with
// `toolgate approvals approve|deny ID`; no answer in time, or a gateway
// shutting down, is a denial. An approval may stand for a while (--for) for
// the same rule, or only for calls of the same digest (--same-args).
//
// What a person is shown is all of the call, its secrets redacted by the
// audit's own redaction (Redactor): nothing is cut but the input in a list
// (Get has all of it), and a cut says so.
package approval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
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

// ListInput is how much of a waiting call's input List shows; Get shows
// all of it.
const ListInput = 4 << 10

// Pending is a call waiting for a person as they are shown it (the admin
// API's shape); Input its standard input.
type (
	Pending = api.Pending
	Input   = api.PendingInput
)

// waiting is a Pending call with the channel its answer comes on.
type waiting struct {
	Pending
	answer chan Answer
}

// Redactor hides secret values in what a person is shown of a call. The
// daemon gives the audit's Bounder: a waiting call shows what its entries
// record, through one redaction.
type Redactor interface {
	Redact(args json.RawMessage) json.RawMessage // every value kept, secrets redacted
	RedactText(s string) string
}

// Answer is a person's answer to one waiting call.
type Answer struct {
	Approve  bool          `json:"approve"`
	Reason   string        `json:"reason,omitempty"`
	For      time.Duration `json:"for,omitempty"`       // the approval stands this long
	SameArgs bool          `json:"same_args,omitempty"` // … only for identical arguments
	Raise    string        `json:"raise,omitempty"`     // new caps for a task at its budget
	By       string        `json:"-"`                   // who answered: the door's identity, never the body's
	outcome  string        // the gateway's own answer (unnotified), not a person's
}

// Store keeps the waiting calls and standing approvals. Safe for concurrent use.
type Store struct {
	redact   Redactor
	links    *Links
	log      *slog.Logger
	notify   atomic.Pointer[Notify]
	mu       sync.Mutex
	pending  map[string]*waiting
	standing []standing
	closed   bool
	now      func() time.Time
}

type standing struct {
	agent, rule, tool, digest string // digest "" for any arguments
	by                        string
	granted, until            time.Time
}

// New returns an empty store showing calls through r; nil shows them as
// they are (no secrets are known).
func New(r Redactor) *Store {
	if r == nil {
		r = asIs{}
	}
	return &Store{redact: r, links: NewLinks(), log: slog.Default(), pending: map[string]*waiting{}, now: time.Now}
}

// Notify is who is told of each call that waits, and how links reach back.
type Notify struct {
	Notifiers []*Notifier
	// LinkBase is the URL the links start with (the gateway's listen
	// address as approvers reach it).
	LinkBase string
	// RequireToken: an answer by link needs an admin token too.
	RequireToken bool
	Logger       *slog.Logger
}

// SetNotify puts n in force for the calls that ask from now on (a reload
// calls it again); nil tells no one.
func (s *Store) SetNotify(n *Notify) { s.notify.Store(n) }

// RequiresToken says whether an answer by link needs an admin token.
func (s *Store) RequiresToken() bool {
	n := s.notify.Load()
	return n != nil && n.RequireToken
}

type asIs struct{}

func (asIs) Redact(args json.RawMessage) json.RawMessage { return args }
func (asIs) RedactText(s string) string                  { return s }

var _ gateway.Approver = (*Store)(nil)

// Await implements gateway.Approver: it waits for a person's answer to
// call, until timeout, ctx's end, or Close — each of those a denial.
func (s *Store) Await(ctx context.Context, call *gateway.Call, dec gateway.Decision, timeout time.Duration) gateway.Approval {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	start := s.now()
	digest := Digest(call)
	s.mu.Lock()
	st, ok := s.standingFor(call, dec.Rule, digest, start)
	s.mu.Unlock()
	if ok {
		what := "any arguments"
		if st.digest != "" {
			what = "the same arguments and input"
		}
		return gateway.Approval{Allow: true, Outcome: "standing", By: st.by, At: st.granted,
			Reason: fmt.Sprintf("approved by %s at %s for %s until %s", st.by, st.granted.UTC().Format(time.RFC3339), what, st.until.UTC().Format(time.RFC3339))}
	}
	// Made ready to show outside the lock: redacting a large input takes a while.
	p := &waiting{Pending: s.shown(call, dec, digest), answer: make(chan Answer, 1)}
	p.Asked, p.Deadline = start, start.Add(timeout)
	// Time out a moment before the caller's own deadline, so the denial is
	// recorded and answered while the caller still listens.
	if dl, ok := ctx.Deadline(); ok && dl.Add(-callerMargin).Before(p.Deadline) {
		p.Deadline = dl.Add(-callerMargin)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return gateway.Approval{Outcome: "shutdown", At: start, Reason: "the gateway is shutting down"}
	}
	n := 0
	for _, w := range s.pending {
		if w.Agent == call.Agent {
			n++
		}
	}
	if n >= MaxPending {
		s.mu.Unlock()
		return gateway.Approval{Outcome: "refused", At: start, Reason: fmt.Sprintf("%d calls of agent %s already wait for a person", n, call.Agent)}
	}
	s.pending[p.ID] = p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, p.ID)
		s.mu.Unlock()
	}()
	if n := s.notify.Load(); n != nil && len(n.Notifiers) > 0 {
		nctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), p.Deadline)
		defer cancel() // an answer, or the end of the wait, ends the deliveries
		go s.tell(nctx, n, p.Pending)
	}

	t := time.NewTimer(p.Deadline.Sub(start))
	defer t.Stop()
	select {
	case a, ok := <-p.answer:
		at := s.now()
		if !ok {
			return gateway.Approval{Outcome: "shutdown", At: at, Waited: at.Sub(start), Reason: "the gateway shut down while the call waited"}
		}
		out := gateway.Approval{Allow: a.Approve, By: a.By, At: at, Waited: at.Sub(start), Raise: a.Raise}
		switch {
		case a.outcome != "":
			out.Outcome, out.Reason = a.outcome, a.Reason
			return out
		case a.Approve:
			out.Outcome = "approved"
			out.Reason = fmt.Sprintf("approved by %s", a.By)
		default:
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

// shown is a call as a person is shown it: every fact, secrets redacted.
func (s *Store) shown(call *gateway.Call, dec gateway.Decision, digest string) Pending {
	r := s.redact
	p := Pending{ID: call.ID, Agent: call.Agent, Kind: call.Kind, Tool: call.Tool, Rule: dec.Rule, Reason: dec.Reason,
		Digest: digest, Args: string(r.Redact(call.Args)), Command: r.RedactText(call.Command), Path: r.RedactText(call.Path),
		Host: r.RedactText(call.Host), Port: call.Port, Session: call.Session, Policy: dec.Policy}
	if f := call.SessionFacts; f != nil {
		p.Labels, p.AgentLabels = f.Labels, f.Agent.Labels
	}
	for _, a := range call.Argv {
		p.Argv = append(p.Argv, r.RedactText(a))
	}
	if call.Input != nil {
		sum := sha256.Sum256(call.Input)
		p.Input = &Input{Bytes: len(call.Input), SHA256: hex.EncodeToString(sum[:]), Data: []byte(r.RedactText(string(call.Input)))}
	}
	return p
}

func (s *Store) standingFor(call *gateway.Call, rule, digest string, now time.Time) (standing, bool) {
	s.standing = slices.DeleteFunc(s.standing, func(st standing) bool { return !now.Before(st.until) })
	for _, st := range s.standing {
		if st.agent == call.Agent && st.rule == rule && (st.digest == "" || (st.tool == call.Tool && st.digest == digest)) {
			return st, true
		}
	}
	return standing{}, false
}

// List returns the waiting calls, oldest first, each input shortened to
// its first ListInput bytes (Input.Cut says how many more there are).
func (s *Store) List() []Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Pending, 0, len(s.pending))
	for _, p := range s.pending {
		c := p.Pending
		if in := p.Input; in != nil && len(in.Data) > ListInput {
			c.Input = &Input{Bytes: in.Bytes, SHA256: in.SHA256, Data: in.Data[:ListInput], Cut: len(in.Data) - ListInput}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Pending) int { return a.Asked.Compare(b.Asked) })
	return out
}

// Get returns the call waiting under id, all of it.
func (s *Store) Get(id string) (Pending, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[id]
	if !ok {
		return Pending{}, ErrNotFound
	}
	return p.Pending, nil
}

// Answer delivers a person's answer to the call waiting under id. A
// standing approval (For > 0) is kept for the call's agent and rule (and
// tool and arguments, with SameArgs).
func (s *Store) Answer(id string, a Answer) error {
	if a.For < 0 || a.For > 30*24*time.Hour {
		return fmt.Errorf("an approval stands for at most 30 days, not %s", a.For)
	}
	if (a.For > 0 || a.SameArgs || a.Raise != "") && !a.Approve {
		return errors.New("--for, --same-args and --raise go with approve")
	}
	if a.Raise != "" {
		if _, err := config.ParseBudget(a.Raise); err != nil {
			return fmt.Errorf("--raise: %w", err)
		}
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
			st.tool, st.digest = p.Tool, p.Digest
		}
		s.standing = append(s.standing, st)
	}
	p.answer <- a
	return nil
}

// tell sends the notifiers a waiting call; when none could deliver it,
// the call is denied on the record (outcome unnotified), never left
// waiting for a person nobody told.
func (s *Store) tell(ctx context.Context, n *Notify, p Pending) {
	log := n.Logger
	if log == nil {
		log = s.log
	}
	err := notifyAll(ctx, n.Notifiers, s.links, n.LinkBase, p, log)
	if err == nil || ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.pending[p.ID]; ok {
		delete(s.pending, p.ID)
		w.answer <- Answer{By: "toolgate", outcome: "unnotified",
			Reason: "no notifier could tell anyone of the call, so it is denied (" + err.Error() + ")"}
	}
}

// ErrLinkUsed: the link's call is not waiting (any more).
var ErrLinkUsed = errors.New("the link's call is not waiting: it was answered (a link is single-use), timed out or never asked")

// Link returns the claims of a valid link and the call it answers, which
// must still wait, without answering it.
func (s *Store) Link(token string) (Claims, Pending, error) {
	c, err := s.links.Verify(token)
	if err != nil {
		return c, Pending{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, err := s.linked(c)
	if err != nil {
		return c, Pending{}, err
	}
	return c, w.Pending, nil
}

// AnswerLink answers the call a valid link names, the way it names, once:
// by says who presented it, given the link's claims (a token's id, else
// the notifier the link was sent to).
func (s *Store) AnswerLink(token string, by func(Claims) string) (Claims, error) {
	c, err := s.links.Verify(token)
	if err != nil {
		return c, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, err := s.linked(c)
	if err != nil {
		return c, err
	}
	delete(s.pending, c.Call)
	w.answer <- Answer{Approve: c.Approve, By: by(c)}
	return c, nil
}

// linked is the waiting call a link's claims name, bound to the same
// digest and policy.
func (s *Store) linked(c Claims) (*waiting, error) {
	w, ok := s.pending[c.Call]
	switch {
	case !ok:
		return nil, ErrLinkUsed
	case w.Digest != c.Digest || w.Policy != c.Policy:
		return nil, errors.New("the link was made for another version of the call or its policy")
	}
	return w, nil
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

// Digest is what an approval binds: the SHA-256 of a call's agent, kind,
// tool, normalised arguments (JSON with sorted keys, no insignificant
// space, numbers as written — so the same call spelled with other
// whitespace or key order is the same call, and no two numbers are) and,
// when it has one, the SHA-256 of its whole input.
func Digest(call *gateway.Call) string {
	norm := []byte(strings.TrimSpace(string(call.Args)))
	dec := json.NewDecoder(bytes.NewReader(call.Args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil {
			norm = b
		}
	}
	h := sha256.New()
	h.Write([]byte(call.Agent + "\x00" + string(call.Kind) + "\x00" + call.Tool + "\x00"))
	h.Write(norm)
	if len(call.Input) > 0 {
		in := sha256.Sum256(call.Input)
		h.Write([]byte("\x00input\x00"))
		h.Write(in[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}
