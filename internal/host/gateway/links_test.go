package gateway

import (
	"context"
	"encoding/json"
	"testing"
)

// TestParentHints: a parent hint naming a call of the same agent, or a call
// the gateway does not know, is recorded as the parent; one naming a call
// of another agent is not linked — in a call's entries, an observation's
// and a refusal's — and is kept in the detail as what was sent.
func TestParentHints(t *testing.T) {
	sink := &memSink{}
	g := New(Options{Audit: sink}, &Snapshot{
		Agents:  map[string]AgentInfo{"a": {Name: "a"}, "b": {Name: "b"}},
		Tools:   map[string]Tool{"echo": &fakeTool{}},
		Decider: denyTool{},
	})
	handle := func(agent, parent string) *Call {
		t.Helper()
		c := &Call{Agent: agent, Tool: "echo", Args: json.RawMessage(`{}`), Parent: parent, Session: "s", Detail: map[string]any{"k": "v"}}
		if _, err := g.Handle(context.Background(), c, nil); err != nil {
			t.Fatal(err)
		}
		return c
	}
	aRun := handle("a", "")
	aChild := handle("a", aRun.ID)
	bGraft := handle("b", aRun.ID)
	bUnknown := handle("b", "never-seen")
	bChild := handle("b", bGraft.ID)
	obsID, err := g.Observe(&Observation{Agent: "b", Type: KindHook, Tool: "Bash", Verdict: VerdictReported, Parent: aChild.ID})
	if err != nil {
		t.Fatal(err)
	}
	refused := &Call{Agent: "b", Tool: "echo", Parent: aRun.ID}
	_ = g.Refuse("b", refused, Decision{Rule: "x", Reason: "y"})

	// The session hint is kept: a session is one agent's, read so by
	// every reader (internal/host/calltree).
	for _, tc := range []struct {
		id, parent, unlinked, session string
	}{
		{aChild.ID, aRun.ID, "", "s"},
		{bGraft.ID, "", aRun.ID, "s"},
		{bUnknown.ID, "never-seen", "", "s"},
		{bChild.ID, bGraft.ID, "", "s"},
		{obsID, "", aChild.ID, ""},
		{refused.ID, "", aRun.ID, ""},
	} {
		n := 0
		for _, e := range sink.entries {
			if e.ID != tc.id {
				continue
			}
			n++
			got, _ := e.Detail[DetailUnlinkedParent].(string)
			if e.Parent != tc.parent || got != tc.unlinked || e.Session != tc.session {
				t.Errorf("%s %s entry of %s: parent %q, unlinked %q, session %q; want %q, %q, %q",
					e.Phase, e.Type, e.Agent, e.Parent, got, e.Session, tc.parent, tc.unlinked, tc.session)
			}
		}
		if n == 0 {
			t.Errorf("no entry %s", tc.id)
		}
	}
	if bGraft.Detail["k"] != "v" {
		t.Errorf("the call's own detail lost: %v", bGraft.Detail)
	}
}

type discardSink struct{}

func (discardSink) Append(*Entry) error { return nil }

// BenchmarkParentHints: what remembering each call's agent and checking
// its parent hint adds to a call ("links", with a parent of the same
// agent, the common case), beside a whole call through Handle in memory.
func BenchmarkParentHints(b *testing.B) {
	g := New(Options{Audit: discardSink{}}, &Snapshot{
		Agents:  map[string]AgentInfo{"a": {Name: "a"}},
		Tools:   map[string]Tool{"echo": &fakeTool{}},
		Decider: denyTool{},
	})
	parent := NewID()
	g.links.remember(parent, "a")
	b.Run("handle", func(b *testing.B) {
		for b.Loop() {
			if _, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`), Parent: parent}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	ids := make([]string, 1<<17)
	for i := range ids {
		ids[i] = NewID()
	}
	b.Run("links", func(b *testing.B) {
		var detail map[string]any
		i := 0
		for b.Loop() {
			p := parent
			g.links.unlink("a", &p, &detail)
			g.links.remember(ids[i%len(ids)], "a")
			i++
		}
	})
}
