package gatewaycmd

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/gateway"
)

// Each call sits under the call that caused it: a tool call under the
// model call whose answer listed its tool_use id, what a run's process did
// under the run's exec; a call whose parent is not in the session is a root.
func TestSessionTree(t *testing.T) {
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	e := func(id, phase string, kind gateway.Kind, tool, decision, parent string, detail map[string]any) *gateway.Entry {
		at = at.Add(time.Millisecond)
		return &gateway.Entry{TS: at, ID: id, Phase: phase, Type: kind, Tool: tool, Decision: decision, Session: "s", Parent: parent, Detail: detail,
			Args: []byte(`{"command":"` + id + `-cmd"}`)}
	}
	entries := []*gateway.Entry{
		e("m1", gateway.PhaseDecision, gateway.KindModel, "anthropic", "allow", "", nil),
		e("m1", gateway.PhaseResult, gateway.KindModel, "anthropic", "allow", "", map[string]any{"toolUseIds": []any{"toolu_a", "toolu_b"}, "inputTokens": 10.0, "outputTokens": 2.0}),
		e("x1", gateway.PhaseDecision, gateway.KindCore, "exec", "allow", "toolu_a", nil),
		e("h1", gateway.PhaseDecision, gateway.KindHook, "Bash", "deny", "x1", nil),
		e("x2", gateway.PhaseDecision, gateway.KindCore, "exec", "deny", "toolu_b", nil),
		e("o1", gateway.PhaseDecision, gateway.KindCore, "read", "allow", "elsewhere", nil),
	}
	var b strings.Builder
	printSessionTree(&b, "s", entries)
	got := b.String()
	var shape []string
	for _, l := range strings.Split(strings.TrimSpace(got), "\n")[1:] {
		indent := len(l) - len(strings.TrimLeft(l, " "))
		id := l[strings.LastIndex(l, "(")+1 : len(l)-1]
		shape = append(shape, strings.Repeat(".", indent/2)+id)
	}
	want := []string{".m1", "..x1", "...h1", "..x2", ".o1"}
	if strings.Join(shape, " ") != strings.Join(want, " ") || !strings.Contains(got, "5 calls, 2 denied") || !strings.Contains(got, "tokens=10/2") {
		t.Fatalf("tree %v, want %v:\n%s", shape, want, got)
	}
}
