package gateway

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// labelDecider gives "private" to every call and denies {"forbidden"}.
type labelDecider struct{ seen []*SessionFacts }

func (d *labelDecider) Decide(call *Call) Decision {
	d.seen = append(d.seen, call.SessionFacts)
	if strings.Contains(string(call.Args), "forbidden") {
		return Decision{Rule: "r", Reason: "no", Labels: []string{"private"}}
	}
	return Decision{Allow: true, Rule: "default", Labels: []string{"private"}}
}

// recSessions records what the gateway asks and gives.
type recSessions struct {
	mu    sync.Mutex
	given []string // call ids
}

func (s *recSessions) Facts(call *Call) *SessionFacts         { return &SessionFacts{ID: call.Session} }
func (s *recSessions) Charge(*Call, bool) (func(), *Decision) { return nil, nil }
func (s *recSessions) Raise(*Call, string) error              { return nil }
func (s *recSessions) Give(call *Call, dec Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.given = append(s.given, call.ID)
}

// TestSessionLabels: policy decides with the session's facts; an allowed
// call's labels and target are on its decision entry and given to its
// session once recorded; a denied call, or one whose decision could not be
// recorded, gives nothing and records no labels.
func TestSessionLabels(t *testing.T) {
	sink, dec, sess := &memSink{}, &labelDecider{}, &recSessions{}
	g := New(Options{Audit: sink, Sessions: sess}, &Snapshot{
		Agents: map[string]AgentInfo{"a": {Name: "a"}}, Tools: map[string]Tool{"echo": &fakeTool{}}, Decider: dec})
	if _, err := g.Handle(t.Context(), &Call{Agent: "a", Tool: "echo", Args: []byte(`{}`), Session: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	var denied *DeniedError
	if _, err := g.Handle(t.Context(), &Call{Agent: "a", Tool: "echo", Args: []byte(`{"x":"forbidden"}`), Session: "s1"}, nil); !errors.As(err, &denied) {
		t.Fatalf("want a denial, got %v", err)
	}
	sink.fail = errors.New("disk full")
	if _, err := g.Handle(t.Context(), &Call{Agent: "a", Tool: "echo", Args: []byte(`{}`)}, nil); !errors.Is(err, ErrAuditUnavailable) {
		t.Fatalf("want the audit refusal, got %v", err)
	}
	if len(dec.seen) != 3 || dec.seen[0] == nil || dec.seen[0].ID != "s1" {
		t.Fatalf("policy saw session facts %+v", dec.seen)
	}
	first := sink.entries[0]
	if !slices.Equal(sess.given, []string{first.ID}) {
		t.Errorf("given to the session: %v, want only the allowed, recorded call %s", sess.given, first.ID)
	}
	if l, _ := first.Detail["labels"].([]string); !slices.Equal(l, []string{"private"}) {
		t.Errorf("the allowed call's entry records labels %v", first.Detail["labels"])
	}
	for _, e := range sink.entries[1:] {
		if e.Phase == PhaseDecision {
			if _, ok := e.Detail["labels"]; ok {
				t.Errorf("the denied call's entry records labels: %+v", e.Detail)
			}
		}
	}
}
