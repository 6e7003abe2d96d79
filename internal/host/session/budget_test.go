package session

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// TestBudgetCaps: a task's calls count against its caps; a call naming no
// open task of its agent counts against each of them (a hint cannot
// escape a budget); at a cap a call asks unless forced; a raise makes
// room; a closed task counts nothing.
func TestBudgetCaps(t *testing.T) {
	t.Parallel()
	tr := New()
	endA, err := tr.Open("a", "task-a", "calls=2")
	if err != nil {
		t.Fatal(err)
	}
	endB, _ := tr.Open("a", "task-b", "calls=3")
	call := func(session string) *gateway.Call { return &gateway.Call{Agent: "a", Session: session, Tool: "exec"} }
	charge := func(c *gateway.Call) *gateway.Decision {
		settle, over := tr.Charge(c, false)
		if over == nil {
			settle(true)
		}
		return over
	}
	if d := charge(call("task-a")); d != nil {
		t.Fatalf("first call: %+v", d)
	}
	if d := charge(call("invented")); d != nil { // counts against task-a and task-b
		t.Fatalf("a call of no task: %+v", d)
	}
	d := charge(call("task-a"))
	if d == nil || !d.Ask || d.Rule != RuleBudgetCalls || !strings.Contains(d.Reason, "made 2 calls of its 2") {
		t.Fatalf("at the cap: %+v", d)
	}
	if d := charge(call("")); d == nil { // task-a is at its cap, and this call could be its
		t.Fatal("a call without a session escaped the budget at its cap")
	}
	if _, over := tr.Charge(call("task-a"), true); over != nil {
		t.Fatal("a forced call was refused")
	}
	if err := tr.Raise(call("task-a"), "calls=10"); err != nil {
		t.Fatal(err)
	}
	if d := charge(call("task-a")); d != nil {
		t.Fatalf("after the raise: %+v", d)
	}
	for i := 2; i <= 3; i++ {
		if d := charge(call("task-b")); d != nil {
			t.Fatalf("task-b has room for call %d of 3: %+v", i, d)
		}
	}
	if d := charge(call("task-b")); d == nil || d.Rule != RuleBudgetCalls {
		t.Fatalf("task-b at its cap: %+v", d)
	}
	endA()
	endB()
	if d := charge(call("task-a")); d != nil {
		t.Fatalf("a closed task still counts: %+v", d)
	}
	if other := charge(&gateway.Call{Agent: "b"}); other != nil {
		t.Fatalf("another agent's call: %+v", other)
	}
}

// TestBudgetCostSettles: a model call holds its reserve while it runs and
// is charged what it used; session.cost sees the settled cost.
func TestBudgetCostSettles(t *testing.T) {
	t.Parallel()
	tr := New()
	end, _ := tr.Open("a", "t", "cost=1,tokens=1000")
	defer end()
	c := &gateway.Call{Agent: "a", Session: "t", Kind: gateway.KindModel,
		Model: &gateway.ModelFacts{Reserve: gateway.ModelUse{Tokens: 600, Cost: 0.6}}}
	settle, over := tr.Charge(c, false)
	if over != nil {
		t.Fatal(over)
	}
	c2 := &gateway.Call{Agent: "a", Session: "t", Kind: gateway.KindModel, Model: &gateway.ModelFacts{Reserve: gateway.ModelUse{Tokens: 600, Cost: 0.6}}}
	settle2, over := tr.Charge(c2, false) // room left: 0.6 < 1
	if over != nil {
		t.Fatal(over)
	}
	if _, over := tr.Charge(&gateway.Call{Agent: "a", Session: "t"}, false); over == nil || over.Rule != RuleBudgetCost {
		t.Fatalf("with $1.20 held of $1: %+v", over)
	}
	c.Model.Used = &gateway.ModelUse{Tokens: 100, Cost: 0.1}
	settle(true)
	settle2(true) // used nothing (the request failed): its hold is released
	if _, over := tr.Charge(&gateway.Call{Agent: "a", Session: "t"}, false); over != nil {
		t.Fatalf("after settling: %+v", over)
	}
	f := tr.Facts(&gateway.Call{Agent: "a", Session: "t"})
	if f.Cost != 0.1 || f.Tokens != 100 || f.Agent.Cost != 0.1 {
		t.Errorf("facts %+v", f)
	}
}

func TestParseBudget(t *testing.T) {
	t.Parallel()
	b, err := config.ParseBudget("cost=2.5, calls=500,wall=30m,tokens=1000")
	if err != nil || b.Cost != 2.5 || b.Calls != 500 || b.Wall.Minutes() != 30 || b.Tokens != 1000 || b.String() != "cost=2.5,tokens=1000,calls=500,wall=30m0s" {
		t.Fatalf("%+v %v", b, err)
	}
	for _, bad := range []string{"", "cost", "cost=", "cost=x", "cost=-1", "cost=NaN", "dollars=2", "calls=1,calls=2", "wall=10", "calls=1.5"} {
		if _, err := config.ParseBudget(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
	if _, err := New().Open("a", "s", "cost=x"); err == nil {
		t.Error("Open took a bad budget")
	}
}

// TestUnranCallCountsNothing: a call charged and then refused before it ran
// (a rate limit, the audit) leaves the task's count as it was.
func TestUnranCallCountsNothing(t *testing.T) {
	t.Parallel()
	tr := New()
	end, _ := tr.Open("a", "t", "calls=1")
	defer end()
	c := &gateway.Call{Agent: "a", Session: "t"}
	settle, over := tr.Charge(c, false)
	if over != nil {
		t.Fatal(over)
	}
	settle(false)
	if settle, over = tr.Charge(c, false); over != nil {
		t.Fatalf("a call that never ran was counted: %+v", over)
	}
	settle(true)
	if _, over = tr.Charge(c, false); over == nil {
		t.Fatal("the call that ran was not counted")
	}
}
