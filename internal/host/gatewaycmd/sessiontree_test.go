package gatewaycmd

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// A session prints as one tree per agent (calltree), each call under the
// call that caused it and each line naming its agent: a tool call under
// the model call whose answer listed its tool_use id, what a run's process
// did under the run's exec; a call whose parent is not in the session, or
// is another agent's call, is a root.
func TestSessionTree(t *testing.T) {
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	e := func(agent, id, phase string, kind gateway.Kind, tool, decision, parent string, detail map[string]any) *gateway.Entry {
		at = at.Add(time.Millisecond)
		return &gateway.Entry{TS: at, Agent: agent, ID: id, Phase: phase, Type: kind, Tool: tool, Decision: decision, Session: "s", Parent: parent, Detail: detail,
			Args: []byte(`{"command":"` + id + `-cmd"}`)}
	}
	entries := []*gateway.Entry{
		e("alpha", "m1", gateway.PhaseDecision, gateway.KindModel, "anthropic", "allow", "", nil),
		e("alpha", "m1", gateway.PhaseResult, gateway.KindModel, "anthropic", "allow", "", map[string]any{"toolUseIds": []any{"toolu_a", "toolu_b"}, "inputTokens": 10.0, "outputTokens": 2.0}),
		e("alpha", "x1", gateway.PhaseDecision, gateway.KindCore, "exec", "allow", "toolu_a", nil),
		e("alpha", "h1", gateway.PhaseDecision, gateway.KindHook, "Bash", "deny", "x1", nil),
		e("beta", "g1", gateway.PhaseDecision, gateway.KindTool, "echo", "allow", "x1", nil),
		e("alpha", "x2", gateway.PhaseDecision, gateway.KindCore, "exec", "deny", "toolu_b", nil),
		e("alpha", "o1", gateway.PhaseDecision, gateway.KindCore, "read", "allow", "elsewhere", nil),
	}
	var b strings.Builder
	printSessionTree(&b, "s", entries)
	got := b.String()
	var shape []string
	for _, l := range strings.Split(strings.TrimSpace(got), "\n")[1:] {
		if strings.HasPrefix(l, "session ") {
			shape = append(shape, "|")
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		id := l[strings.LastIndex(l, "(")+1 : len(l)-1]
		agent := strings.Fields(l)[1]
		shape = append(shape, strings.Repeat(".", indent/2)+agent+":"+id)
	}
	want := []string{"|", ".alpha:m1", "..alpha:x1", "...alpha:h1", "..alpha:x2", ".alpha:o1", "|", ".beta:g1"}
	if strings.Join(shape, " ") != strings.Join(want, " ") || !strings.Contains(got, "session s of agent alpha: 5 calls, 2 denied") ||
		!strings.Contains(got, "session s of agent beta: 1 calls, 0 denied") || !strings.Contains(got, "tokens=10/2") ||
		!strings.HasPrefix(got, "calls of 2 agents name session s") {
		t.Fatalf("tree %v, want %v:\n%s", shape, want, got)
	}
}
