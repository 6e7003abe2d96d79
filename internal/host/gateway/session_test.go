package gateway

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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

func (s *recSessions) Facts(call *Call) *SessionFacts             { return &SessionFacts{ID: call.Session} }
func (s *recSessions) Charge(*Call, bool) (func(bool), *Decision) { return nil, nil }
func (s *recSessions) Raise(*Call, string) error                  { return nil }
func (s *recSessions) Give(call *Call, dec Decision) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.given = append(s.given, call.ID)
	return false
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

// tunnelTool holds its call open until its context ends (an egress tunnel).
type tunnelTool struct{ started chan struct{} }

func (tunnelTool) Name() string                          { return "tunnel" }
func (tunnelTool) Kind() Kind                            { return KindEgress }
func (tunnelTool) HoldsOpen() bool                       { return true }
func (tunnelTool) Prepare(call *Call, _ AgentInfo) error { return nil }
func (t tunnelTool) Run(ctx context.Context, call *Call, _ *RunEnv) (*Result, error) {
	t.started <- struct{}{}
	<-ctx.Done()
	return &Result{Error: context.Cause(ctx).Error()}, nil
}

// labelSet is Sessions at its smallest: the labels each agent was given.
type labelSet struct {
	mu     sync.Mutex
	labels map[string]map[string]Label
}

func (s *labelSet) Facts(call *Call) *SessionFacts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &SessionFacts{Agent: ScopeFacts{Labels: s.labels[call.Agent]}}
}
func (s *labelSet) Give(call *Call, dec Decision) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]Label{}
	for k, v := range s.labels[call.Agent] {
		m[k] = v
	}
	changed := false
	for _, l := range dec.Labels {
		if _, ok := m[l]; !ok {
			m[l], changed = Label{Call: call.ID}, true
		}
	}
	s.labels[call.Agent] = m
	return changed
}
func (s *labelSet) Charge(*Call, bool) (func(bool), *Decision) { return nil, nil }
func (s *labelSet) Raise(*Call, string) error                  { return nil }

// exfilPolicy: a read gives private; a tunnel is allowed until the
// agent's sessions hold private.
type exfilPolicy struct{}

func (exfilPolicy) Decide(call *Call) Decision {
	if call.Tool == "echo" {
		return Decision{Allow: true, Rule: "default", Labels: []string{"private"}}
	}
	if f := call.SessionFacts; f != nil {
		if _, ok := f.Agent.Labels["private"]; ok {
			return Decision{Ask: true, Rule: "trifecta", Reason: "private data may not leave"}
		}
	}
	return Decision{Allow: true, Rule: "default", Labels: []string{"external"}}
}

// TestStandingCallRevoked: a tunnel opened before the agent read private
// data is decided again when the read gives the label, and ended before
// the read runs; its result records why. Another agent's tunnel stays.
func TestStandingCallRevoked(t *testing.T) {
	sink := &memSink{}
	tool := tunnelTool{started: make(chan struct{}, 2)}
	g := New(Options{Audit: sink, Sessions: &labelSet{labels: map[string]map[string]Label{}}}, &Snapshot{
		Agents: map[string]AgentInfo{"a": {Name: "a"}, "b": {Name: "b"}}, Tools: map[string]Tool{"echo": &fakeTool{}, "tunnel": tool},
		Decider: exfilPolicy{}})
	ended := make(chan error, 2)
	for _, agent := range []string{"a", "b"} {
		go func() {
			_, err := g.Handle(t.Context(), &Call{Agent: agent, Tool: "tunnel", Args: []byte(`{}`)}, nil)
			ended <- err
		}()
		<-tool.started
	}
	if _, err := g.Handle(t.Context(), &Call{Agent: "a", Tool: "echo", Args: []byte(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel stayed open after the read gave private")
	}
	var revoked *Entry
	for _, e := range sink.entries {
		if e.Phase == PhaseResult && e.Agent == "a" && e.Tool == "tunnel" {
			revoked = e
		}
	}
	if revoked == nil || !strings.Contains(revoked.Error, "gave the session private, and policy no longer allows this call (ask by trifecta") {
		t.Fatalf("the tunnel's result: %+v", revoked)
	}
	select {
	case err := <-ended:
		t.Fatalf("agent b's tunnel ended too: %v", err)
	default:
	}
}
