package session

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

func labelsOf(m map[string]gateway.Label) []string {
	var out []string
	for l := range m {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

func TestGiveAndFacts(t *testing.T) {
	t.Parallel()
	tr := New()
	call := func(id, agent, session, tool, path string) *gateway.Call {
		return &gateway.Call{ID: id, Agent: agent, Session: session, Tool: tool, Kind: gateway.KindCore, Path: path}
	}
	if f := tr.Facts(call("", "a", "s1", "read", "")); f.Labels != nil || f.Agent.Labels != nil || f.ID != "s1" {
		t.Fatalf("a new agent has facts: %+v", f)
	}
	tr.Give(call("c1", "a", "s1", "read", "/workspace/.env"), gateway.Decision{Allow: true, Labels: []string{"private"}})
	before := tr.Facts(call("", "a", "s1", "read", ""))
	tr.Give(call("c2", "a", "s1", "read", "/workspace/other.env"), gateway.Decision{Allow: true, Labels: []string{"private", "untrusted"}})
	tr.Give(call("c3", "a", "s2", "exec", ""), gateway.Decision{Allow: true})

	s1 := tr.Facts(call("", "a", "s1", "read", ""))
	if got := labelsOf(s1.Labels); !slices.Equal(got, []string{"private", "untrusted"}) || s1.Calls != 2 {
		t.Fatalf("session s1: %v, %d calls", got, s1.Calls)
	}
	if g := s1.Labels["private"]; g.Call != "c1" || g.Target != "/workspace/.env" || g.Tool != "read" {
		t.Errorf("private's giver is %+v, want the first call that gave it", g)
	}
	if got := labelsOf(before.Labels); !slices.Equal(got, []string{"private"}) {
		t.Errorf("facts handed out earlier changed: %v", got)
	}
	s2 := tr.Facts(call("", "a", "s2", "read", ""))
	if s2.Labels != nil || s2.Calls != 1 || !slices.Equal(labelsOf(s2.Agent.Labels), []string{"private", "untrusted"}) || s2.Agent.Calls != 3 {
		t.Errorf("session s2: %+v", s2)
	}
	if b := tr.Facts(call("", "b", "s1", "read", "")); b.Agent.Labels != nil {
		t.Errorf("another agent shares labels: %+v", b)
	}
}

// TestForgetsOldSessionsNotTheAgent: an agent flooding session hints
// makes the tracker forget its least recently used sessions, never the
// labels of the agent's own scope.
func TestForgetsOldSessionsNotTheAgent(t *testing.T) {
	t.Parallel()
	tr := New()
	tr.Give(&gateway.Call{ID: "c0", Agent: "a", Session: "keep"}, gateway.Decision{Allow: true, Labels: []string{"private"}})
	tr.Give(&gateway.Call{ID: "c1", Agent: "a", Session: "first"}, gateway.Decision{Allow: true, Labels: []string{"untrusted"}})
	for i := range MaxSessions {
		tr.Facts(&gateway.Call{Agent: "a", Session: "keep"}) // in use all along
		tr.Give(&gateway.Call{ID: fmt.Sprint("f", i), Agent: "a", Session: fmt.Sprint("flood", i)}, gateway.Decision{Allow: true})
	}
	if f := tr.Facts(&gateway.Call{Agent: "a", Session: "first"}); f.Labels != nil {
		t.Errorf("the least recently used session is still kept: %+v", f.Labels)
	}
	f := tr.Facts(&gateway.Call{Agent: "a", Session: "keep"})
	if _, ok := f.Labels["private"]; !ok {
		t.Errorf("a session in use was forgotten")
	}
	if got := labelsOf(f.Agent.Labels); !slices.Equal(got, []string{"private", "untrusted"}) {
		t.Errorf("the agent's scope lost labels: %v", got)
	}
	if n := len(tr.agents["a"].sessions); n != MaxSessions {
		t.Errorf("%d sessions kept, want %d", n, MaxSessions)
	}
}

// TestRebuild: the labels a gateway's calls gave come back from its audit
// log, each from the first allowed call that gave it, and nothing from a
// denied call, a result entry or another field named labels.
func TestRebuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := audit.Open(dir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 12, 7, 12, 1, 3, 0, time.UTC)
	for _, e := range []*gateway.Entry{
		{ID: "c1", Phase: gateway.PhaseDecision, Agent: "a", Session: "s1", Type: gateway.KindCore, Tool: "read", Decision: "allow",
			Detail: map[string]any{"labels": []string{"private"}, "target": "/workspace/.env"}},
		{ID: "c1", Phase: gateway.PhaseResult, Agent: "a", Session: "s1", Type: gateway.KindCore, Tool: "read", Decision: "allow",
			Detail: map[string]any{"labels": []string{"forged"}}},
		{ID: "c2", Phase: gateway.PhaseDecision, Agent: "a", Session: "s1", Type: gateway.KindEgress, Tool: "egress", Decision: "deny",
			Detail: map[string]any{"labels": []string{"untrusted"}}},
		{ID: "c3", Phase: gateway.PhaseDecision, Agent: "a", Session: "s2", Type: gateway.KindTool, Tool: "git", Decision: "allow",
			Args: []byte(`{"labels":["argv"]}`)},
		{ID: "c4", Phase: gateway.PhaseDecision, Agent: "a", Session: "s2", Type: gateway.KindEgress, Tool: "egress", Decision: "allow",
			Detail: map[string]any{"labels": []string{"untrusted", "external"}, "target": "example.com:443"}},
		{ID: "c5", Phase: gateway.PhaseDecision, Agent: "a", Session: "s1", Type: gateway.KindCore, Tool: "read", Decision: "allow",
			Detail: map[string]any{"labels": []string{"private"}, "target": "/workspace/later.env"}},

		{ID: "x1", Phase: gateway.PhaseResult, Agent: "b", Type: gateway.KindAdmin, Tool: ToolClear, Decision: gateway.VerdictCleared},
	} {
		e.TS = ts
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cleared := t.TempDir()
	cw, err := audit.Open(cleared, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*gateway.Entry{
		{ID: "d1", Phase: gateway.PhaseDecision, Agent: "a", Session: "s1", Type: gateway.KindCore, Tool: "read", Decision: "allow",
			Detail: map[string]any{"labels": []string{"private", "untrusted"}, "target": "/workspace/.env"}},
		{ID: "x2", Phase: gateway.PhaseResult, Agent: "a", Type: gateway.KindAdmin, Tool: ToolClear, Decision: gateway.VerdictCleared},
		{ID: "d2", Phase: gateway.PhaseDecision, Agent: "a", Session: "s2", Type: gateway.KindEgress, Tool: "egress", Decision: "allow",
			Detail: map[string]any{"labels": []string{"external"}, "target": "x.test:443"}},
	} {
		e.TS = ts
		if err := cw.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	ct := New()
	if err := ct.Rebuild(cleared); err != nil {
		t.Fatal(err)
	}
	if f := ct.Facts(&gateway.Call{Agent: "a", Session: "s1"}); f.Labels != nil || !slices.Equal(labelsOf(f.Agent.Labels), []string{"external"}) {
		t.Errorf("after a clear: session %v, agent %v", labelsOf(f.Labels), labelsOf(f.Agent.Labels))
	}
	tr := New()
	if err := tr.Rebuild(dir); err != nil {
		t.Fatal(err)
	}
	s1 := tr.Facts(&gateway.Call{Agent: "a", Session: "s1"})
	if got := labelsOf(s1.Labels); !slices.Equal(got, []string{"private"}) {
		t.Fatalf("session s1 rebuilt as %v", got)
	}
	if g := s1.Labels["private"]; g.Call != "c1" || g.Target != "/workspace/.env" || !g.At.Equal(ts) || g.Kind != gateway.KindCore {
		t.Errorf("private's giver rebuilt as %+v", g)
	}
	if got := labelsOf(s1.Agent.Labels); !slices.Equal(got, []string{"external", "private", "untrusted"}) || s1.Agent.Calls != 0 {
		t.Errorf("the agent's scope rebuilt as %v (%d calls)", got, s1.Agent.Calls)
	}
	if err := New().Rebuild(filepath.Join(dir, "none")); err != nil {
		t.Errorf("a gateway with no log yet: %v", err)
	}
}

// BenchmarkRebuild1M rebuilds the labels of a 1M-entry log of which one
// decision in a hundred gave labels (the goal: 2 s), beside the
// same log decoded whole, as a reader without the Has filter would.
func BenchmarkRebuild1M(b *testing.B) {
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range 1_000_000 {
		detail := `{"stdoutBytes":120,"truncated":false}`
		if i%200 == 0 {
			detail = fmt.Sprintf(`{"labels":["private"],"target":"/workspace/s%d/.env"}`, i%7)
		}
		phase := "decision"
		if i%2 == 1 {
			phase = "result"
		}
		fmt.Fprintf(w, `{"ts":"2026-12-07T12:00:00.%06dZ","id":"18ed0cfbfd94ff%018d","phase":%q,"agent":"a%d","type":"core_tool","tool":"read","args":{"path":"/workspace/src/pkg%d/main.go"},"decision":"allow","rule":"default","session":"s%d","detail":%s,"hash":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`+"\n",
			i%1_000_000, i/2, phase, i%5, i, i%50, detail)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.Run("rebuild", func(b *testing.B) {
		for b.Loop() {
			tr := New()
			if err := tr.Rebuild(dir); err != nil {
				b.Fatal(err)
			}
			if l := tr.Facts(&gateway.Call{Agent: "a0"}).Agent.Labels; len(l) != 1 {
				b.Fatalf("labels %v", l)
			}
		}
	})
	b.Run("baseline-decode-all", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := audit.Query(dir, audit.Filter{}, func(*gateway.Entry) error { n++; return nil }); err != nil || n != 1_000_000 {
				b.Fatal(n, err)
			}
		}
	})
}

// BenchmarkCallPath is what the tracker adds to every call the gateway
// handles (Facts, Charge and its settle, Give), with one task open and a
// hundred sessions known, beside the policy decision it feeds
// (BenchmarkDecideSession in internal/host/policy: ~14 µs).
func BenchmarkCallPath(b *testing.B) {
	tr := New()
	end, _ := tr.Open("a", "task", "calls=1000000000")
	defer end()
	for i := range 100 {
		tr.Give(&gateway.Call{ID: fmt.Sprint(i), Agent: "a", Session: fmt.Sprint("s", i)}, gateway.Decision{Allow: true, Labels: []string{"private"}})
	}
	call := &gateway.Call{ID: "c", Agent: "a", Session: "task", Tool: "exec"}
	dec := gateway.Decision{Allow: true, Labels: []string{"private"}}
	b.ReportAllocs()
	for b.Loop() {
		call.SessionFacts = tr.Facts(call)
		settle, _ := tr.Charge(call, false)
		tr.Give(call, dec)
		settle(true)
	}
}

// TestGiverTimeFromID: a label's giver is dated by its call's id, so a
// replayed call's label carries the time the call was made, not the replay's.
func TestGiverTimeFromID(t *testing.T) {
	t.Parallel()
	made := time.Date(2026, 11, 30, 9, 15, 0, 0, time.UTC)
	id := fmt.Sprintf("%016x%016x", made.UnixNano(), 42)
	tr := New()
	tr.Give(&gateway.Call{ID: id, Agent: "a", Tool: "read"}, gateway.Decision{Allow: true, Labels: []string{"private"}})
	if g := tr.Facts(&gateway.Call{Agent: "a"}).Agent.Labels["private"]; !g.At.Equal(made) {
		t.Errorf("the giver is dated %v, want %v", g.At, made)
	}
}
