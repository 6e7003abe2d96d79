// Package calltree is how a session is shown: its calls as trees, one per
// agent, each call under the call that caused it. The CLI's `audit show
// --session` and the dashboard's session page both draw from it, so the
// rule below holds wherever a session is shown.
//
// A session is one agent's: the session and parent a call carries are hints
// its sandbox sent (docs/protocol.md), and a hint is never authority. So a
// call is linked only to a call of its own agent, and entries of several
// agents under one session id are several trees, each named for its agent:
// another agent naming this session or one of its calls cannot put its
// calls into this tree, in logs written before the gateway refused such
// hints as in logs written since.
package calltree

import (
	"slices"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Call is one call of a tree: its entries in log order (decision, ask,
// result, or a lone observation) and the calls it caused.
type Call[T any] struct {
	Items   []T
	Kids    []*Call[T]
	entries []*gateway.Entry // Items' entries, in the same order
}

// First is the call's first entry; its parent hint and details place it.
func (c *Call[T]) First() *gateway.Entry { return c.entries[0] }

// Last is the call's last entry: its result when it has one.
func (c *Call[T]) Last() *gateway.Entry { return c.entries[len(c.entries)-1] }

// Decision is how the call was decided: its last entry that is not a
// result (an ask's answer follows the ask), or its observation's word.
func (c *Call[T]) Decision() string {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if c.entries[i].Phase != gateway.PhaseResult {
			return c.entries[i].Decision
		}
	}
	return c.Last().Decision
}

// Tree is one agent's calls in a session.
type Tree[T any] struct {
	Agent  string
	Roots  []*Call[T]
	Calls  int // every call in the tree
	Denied int
}

// Build returns the trees of a session's entries, given in log order: one
// per agent, in the order the agents first appear. Within an agent a call
// sits under the model call whose answer emitted the tool_use id it carries
// out, else under the call (or the model call of the tool_use id) its
// parent hint names; else it is a root. A cause's first entry comes before
// its effect's (a model call is decided before the tools it asks for run,
// which may be before its answer's result entry is written), so no chain
// of hints can loop and hide its calls; a tool_use id that several answers
// emitted belongs to the last of them before the call.
func Build[T any](items []T, entry func(T) *gateway.Entry) []*Tree[T] {
	type agentCalls struct {
		tree    *Tree[T]
		byID    map[string]int   // call id → its place in order
		order   []*Call[T]       // by first entry
		toolUse map[string][]int // tool_use id → the model calls that emitted it, in order
	}
	var trees []*Tree[T]
	agents := map[string]*agentCalls{}
	for _, it := range items {
		e := entry(it)
		a := agents[e.Agent]
		if a == nil {
			a = &agentCalls{tree: &Tree[T]{Agent: e.Agent}, byID: map[string]int{}, toolUse: map[string][]int{}}
			agents[e.Agent] = a
			trees = append(trees, a.tree)
		}
		i, ok := a.byID[e.ID]
		if !ok {
			i = len(a.order)
			a.byID[e.ID] = i
			a.order = append(a.order, &Call[T]{})
		}
		c := a.order[i]
		c.Items, c.entries = append(c.Items, it), append(c.entries, e)
		if ids, ok := e.Detail[gateway.DetailToolUseIDs].([]any); ok {
			for _, id := range ids {
				if s, ok := id.(string); ok && !slices.Contains(a.toolUse[s], i) {
					a.toolUse[s] = append(a.toolUse[s], i)
				}
			}
		}
	}
	for _, tr := range trees {
		a := agents[tr.Agent]
		// emitter is the last model call before call i that emitted id.
		emitter := func(id string, i int) int {
			at := -1
			for _, j := range a.toolUse[id] {
				if j < i {
					at = j
				}
			}
			return at
		}
		for i, c := range a.order {
			tr.Calls++
			if c.Decision() == gateway.VerdictDeny {
				tr.Denied++
			}
			first, cause := c.First(), -1
			if id, ok := first.Detail[gateway.DetailToolUseID].(string); ok {
				cause = emitter(id, i)
			}
			if cause < 0 && first.Parent != "" {
				if j, ok := a.byID[first.Parent]; ok && j < i {
					cause = j
				} else {
					cause = emitter(first.Parent, i)
				}
			}
			if cause < 0 {
				tr.Roots = append(tr.Roots, c)
				continue
			}
			a.order[cause].Kids = append(a.order[cause].Kids, c)
		}
	}
	return trees
}
