package session

import (
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Rule names of budget decisions, as the audit entry's `rule` shows them.
const (
	RuleBudgetCost   = "session.budget.cost"
	RuleBudgetTokens = "session.budget.tokens"
	RuleBudgetCalls  = "session.budget.calls"
	RuleBudgetWall   = "session.budget.wall"
)

// A task's budget: its caps, what its calls used and what the calls
// still running hold (a model request's Reserve until it settles).
type budget struct {
	agent, session string
	caps           config.SessionBudget
	opened         time.Time
	open           int // Opens not yet closed: runs of the same session share it
	calls          int
	cost, held     float64
	tokens, heldT  int64
}

// SetDefaults puts each agent's session.budget in force for the tasks
// opened from now on (a reload calls it again).
func (t *Tracker) SetDefaults(cfg *config.Config) {
	d := map[string]config.SessionBudget{}
	for name, a := range cfg.Agents {
		if a.Session.Budget != nil {
			d[name] = *a.Session.Budget
		}
	}
	t.mu.Lock()
	t.defaults = d
	t.mu.Unlock()
}

// Open starts a task of agent under session with the caps spec gives
// (config.ParseBudget's form), or the agent's session.budget when spec is
// empty; close ends it. Only the gateway's own doors open tasks (a run's
// exec, toolgate agent), never a call from a sandbox. Opening a session
// that is open shares its budget; without caps, nothing is opened.
func (t *Tracker) Open(agent, session, spec string) (close func(), err error) {
	caps, ok := config.SessionBudget{}, false
	if spec != "" {
		if caps, err = config.ParseBudget(spec); err != nil {
			return nil, err
		}
		ok = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ok {
		caps, ok = t.defaults[agent]
	}
	if !ok || caps == (config.SessionBudget{}) {
		return func() {}, nil
	}
	key := [2]string{agent, session}
	b := t.budgets[key]
	if b == nil {
		b = &budget{agent: agent, session: session, caps: caps, opened: time.Now()}
		t.budgets[key] = b
	}
	b.open++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if b.open--; b.open == 0 {
			delete(t.budgets, key)
		}
	}, nil
}

// chargedLocked is the budgets a call counts against: its session's, or,
// when its session has none, every open budget of its agent — hints come
// from the agent, and a budget a new hint escaped would be no budget.
func (t *Tracker) chargedLocked(call *gateway.Call) []*budget {
	if b := t.budgets[[2]string{call.Agent, call.Session}]; b != nil {
		return []*budget{b}
	}
	var out []*budget
	for _, b := range t.budgets {
		if b.agent == call.Agent {
			out = append(out, b)
		}
	}
	return out
}

// Charge implements gateway.Sessions: the call is counted, and a model
// call's Reserve held, in each budget it counts against — unless one of
// them is at a cap, when the call asks a person (force: they approved it).
// A budget admits a call while it has room left, so calls running at
// once overshoot a cap by at most what each of them holds.
func (t *Tracker) Charge(call *gateway.Call, force bool) (func(ran bool), *gateway.Decision) {
	var res gateway.ModelUse
	if call.Model != nil {
		res = call.Model.Reserve
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	bs := t.chargedLocked(call)
	if !force {
		for _, b := range bs {
			if d := b.over(time.Now()); d != nil {
				return nil, d
			}
		}
	}
	for _, b := range bs {
		b.calls++
		b.held += res.Cost
		b.heldT += res.Tokens
	}
	return func(ran bool) { t.settle(call, bs, res, ran) }, nil
}

// settle releases what a call held and charges what it used, to its
// budgets and to its session's and agent's facts (session.cost).
func (t *Tracker) settle(call *gateway.Call, bs []*budget, res gateway.ModelUse, ran bool) {
	var used gateway.ModelUse
	if call.Model != nil && call.Model.Used != nil {
		used = *call.Model.Used
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range bs {
		b.held -= res.Cost
		b.heldT -= res.Tokens
		if !ran {
			b.calls--
		}
		b.cost += used.Cost
		b.tokens += used.Tokens
	}
	if used == (gateway.ModelUse{}) {
		return
	}
	a := t.agentLocked(call.Agent)
	s := a.sessionLocked(t, call.Session)
	s.cost += used.Cost
	s.tokens += used.Tokens
	a.all.cost += used.Cost
	a.all.tokens += used.Tokens
}

// over is the ask of a call at one of b's caps, nil while it has room.
func (b *budget) over(now time.Time) *gateway.Decision {
	c := b.caps
	var rule, what string
	switch {
	case c.Calls > 0 && b.calls >= c.Calls:
		rule, what = RuleBudgetCalls, fmt.Sprintf("made %d calls of its %d", b.calls, c.Calls)
	case c.Cost > 0 && b.cost+b.held >= c.Cost:
		rule, what = RuleBudgetCost, fmt.Sprintf("spent $%.4f (and holds $%.4f for calls running) of its $%.2f", b.cost, b.held, c.Cost)
	case c.Tokens > 0 && b.tokens+b.heldT >= c.Tokens:
		rule, what = RuleBudgetTokens, fmt.Sprintf("used %d tokens (and holds %d for calls running) of its %d", b.tokens, b.heldT, c.Tokens)
	case c.Wall > 0 && now.Sub(b.opened) >= c.Wall:
		rule, what = RuleBudgetWall, fmt.Sprintf("run for %s of its %s", now.Sub(b.opened).Round(time.Second), c.Wall)
	default:
		return nil
	}
	key := strings.TrimPrefix(rule, "session.budget.")
	return &gateway.Decision{Ask: true, Rule: rule, Reason: fmt.Sprintf(
		"the task (session %s) has %s; a person may raise it (toolgate approvals approve ID --raise %s=…)", orUnnamed(b.session), what, key)}
}

func orUnnamed(s string) string {
	if s == "" {
		return "unnamed"
	}
	return s
}

// Raise implements gateway.Sessions: the caps spec names replace those of
// every budget the call counts against; the others stay.
func (t *Tracker) Raise(call *gateway.Call, spec string) error {
	r, err := config.ParseBudget(spec)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.chargedLocked(call) {
		if r.Cost > 0 {
			b.caps.Cost = r.Cost
		}
		if r.Tokens > 0 {
			b.caps.Tokens = r.Tokens
		}
		if r.Calls > 0 {
			b.caps.Calls = r.Calls
		}
		if r.Wall > 0 {
			b.caps.Wall = r.Wall
		}
	}
	return nil
}
