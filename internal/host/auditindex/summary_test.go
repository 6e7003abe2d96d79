package auditindex

import (
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// TestUsageAndRuleHits: the dashboard's sums come from decisions (calls,
// denials, rule hits) and from the model and egress results' detail; the
// lines the index hands back check against their own hashes.
func TestUsageAndRuleHits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := audit.Open(dir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	add := func(agent string, kind gateway.Kind, phase, decision, rule string, detail map[string]any) {
		if err := w.Append(&gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: phase, Agent: agent, Type: kind,
			Tool: string(kind), Decision: decision, Rule: rule, Detail: detail}); err != nil {
			t.Fatal(err)
		}
	}
	add("a", gateway.KindCore, gateway.PhaseDecision, "allow", "default", nil)
	add("a", gateway.KindCore, gateway.PhaseResult, "allow", "default", nil)
	add("a", gateway.KindCore, gateway.PhaseDecision, "deny", "no-rm", nil)
	add("a", gateway.KindModel, gateway.PhaseDecision, "allow", "default", nil)
	add("a", gateway.KindModel, gateway.PhaseResult, "allow", "default", map[string]any{"inputTokens": 100, "outputTokens": 7, "costUSD": 0.25})
	add("a", gateway.KindModel, gateway.PhaseResult, "allow", "default", map[string]any{"inputTokens": 1, "outputTokens": 2, "costUSD": 0.5})
	add("b", gateway.KindEgress, gateway.PhaseDecision, "allow", "egress.allow", nil)
	add("b", gateway.KindEgress, gateway.PhaseResult, "allow", "egress.allow", map[string]any{"bytesUp": 10, "bytesDown": 90})
	add("b", gateway.KindCore, gateway.PhaseDecision, "deny", "no-rm", nil)
	add("", gateway.KindAdmin, gateway.PhaseDecision, "deny", "auth.token", nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	x := caughtUp(t, dir)
	u, err := x.Usage()
	if err != nil {
		t.Fatal(err)
	}
	a, b := *u["a"], *u["b"]
	if a.Calls != 3 || a.Denials != 1 || a.ModelCalls != 2 || a.InputTokens != 101 || a.OutputTokens != 9 || a.CostUSD != 0.75 || a.Egress != 0 {
		t.Errorf("usage of a: %+v", a)
	}
	if b.Calls != 2 || b.Denials != 1 || b.Egress != 1 || b.EgressBytes != 100 || b.ModelCalls != 0 {
		t.Errorf("usage of b: %+v", b)
	}
	if _, ok := u[""]; ok {
		t.Errorf("a refusal without an agent counted as an agent: %+v", u)
	}
	hits, err := x.RuleHits()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RuleHits{}
	for _, h := range hits {
		got[h.Rule] = h
	}
	if d := got["default"]; d.Allow != 2 || d.Deny != 0 {
		t.Errorf("default: %+v", d)
	}
	if d := got["no-rm"]; d.Deny != 2 || d.LastSeq != 9 {
		t.Errorf("no-rm: %+v", d)
	}
	all, err := x.Find(Query{Limit: 100})
	if err != nil || len(all) != 10 {
		t.Fatalf("find: %d %v", len(all), err)
	}
	for i, h := range all {
		e, err := audit.CheckLine(h.Line)
		if err != nil || e.Hash != h.Entry.Hash || (i > 0 && e.Prev != all[i-1].Entry.Hash) {
			t.Fatalf("entry %d: %v", h.Seq, err)
		}
	}
	bad := append([]byte(nil), all[0].Line...)
	bad[10] ^= 1
	if _, err := audit.CheckLine(bad); err == nil {
		t.Fatal("an edited line passed its hash check")
	}
}
