package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// giver is one session.labels entry: the label its expression gives.
type giver struct {
	label string
	prg   cel.Program
}

// compileGivers compiles the agent's session.labels (the defaults' first).
func (ap *agentPolicy) compileGivers(c *compiler, cfg *config.Config, name string) {
	ap.scope = ap.agent.Session.Scope
	ap.given = map[string]bool{}
	nd := len(cfg.Defaults.Session.Labels)
	for i, l := range ap.agent.Session.Labels {
		field := fmt.Sprintf("agents.%s.session.labels[%d].when", name, i-nd)
		if i < nd {
			field = fmt.Sprintf("defaults.session.labels[%d].when", i)
		}
		x := c.compile(l.When, l.Line, field)
		ap.given[l.Label] = true
		if x.prg != nil {
			ap.givers = append(ap.givers, &giver{label: l.Label, prg: x.prg})
		}
	}
}

// checkLabels refuses an expression testing a label no giver of the
// agent gives: a typo there would make a rule that never fires.
func (ap *agentPolicy) checkLabels(c *compiler, x *compiled, line int, field string) {
	for _, l := range x.labels {
		if ap.given[l] {
			continue
		}
		list := strings.Join(slices.Sorted(maps.Keys(ap.given)), ", ")
		if list == "" {
			list = "none"
		}
		c.errs = append(c.errs, &config.Error{File: c.file, Line: line, Field: field,
			Msg: fmt.Sprintf("label %q is given by none of agent %s's session.labels (given: %s)", l, ap.name, list)})
	}
}

// give evaluates the agent's givers on a call: the labels it gives. A
// giver that cannot be evaluated gives its label — a label only adds care.
func (ap *agentPolicy) give(act *activation) []string {
	var out []string
	for _, g := range ap.givers {
		if slices.Contains(out, g.label) {
			continue
		}
		if match, err := evalBool(g.prg, act); match || err != nil {
			out = append(out, g.label)
		}
	}
	return out
}

// sessionRefs reports what an expression reads of the session: whether
// it reads it at all (session or labels), the label names it tests by a
// literal ("x" in session.labels, "x" in labels, session.labels["x"],
// session.labels.x), and those of them it tests on the session's labels.
func sessionRefs(a *cel.Ast) (reads bool, labels, ofSession []string) {
	note := func(name string, session bool) {
		if !slices.Contains(labels, name) {
			labels = append(labels, name)
		}
		if session && !slices.Contains(ofSession, name) {
			ofSession = append(ofSession, name)
		}
	}
	add := func(e celast.Expr, session bool) {
		if e.Kind() != celast.LiteralKind {
			return
		}
		if s, ok := e.AsLiteral().(types.String); ok {
			note(string(s), session)
		}
	}
	celast.PreOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			reads = reads || e.AsIdent() == "session" || e.AsIdent() == "labels"
		case celast.CallKind:
			c := e.AsCall()
			args := c.Args()
			switch {
			case c.FunctionName() == operators.In && len(args) == 2:
				if ok, session := isLabels(args[1]); ok {
					add(args[0], session)
				}
			case c.FunctionName() == operators.Index && len(args) == 2:
				if ok, session := isLabels(args[0]); ok {
					add(args[1], session)
				}
			}
		case celast.SelectKind:
			if s := e.AsSelect(); s.Operand().Kind() == celast.SelectKind {
				if ok, session := isLabels(s.Operand()); ok {
					note(s.FieldName(), session)
				}
			}
		}
	}))
	return reads, labels, ofSession
}

// isLabels: the expression is `labels` (the call's) or `session.labels`.
func isLabels(e celast.Expr) (ok, session bool) {
	switch e.Kind() {
	case celast.IdentKind:
		return e.AsIdent() == "labels", false
	case celast.SelectKind:
		s := e.AsSelect()
		ok := s.FieldName() == "labels" && s.Operand().Kind() == celast.IdentKind && s.Operand().AsIdent() == "session"
		return ok, ok
	}
	return false, false
}

// scopeFacts are the facts of the scope a rule reads as session.
func (a *activation) scopeFacts() gateway.ScopeFacts {
	f := a.call.SessionFacts
	switch {
	case f == nil:
		return gateway.ScopeFacts{}
	case a.scope == config.ScopeSession:
		return gateway.ScopeFacts{Labels: f.Labels, Calls: f.Calls, Cost: f.Cost, Tokens: f.Tokens}
	}
	return f.Agent
}

// sessionValue is `session` as a rule sees it.
func (a *activation) sessionValue() ref.Val {
	sf := a.scopeFacts()
	lm := make(map[string]any, len(sf.Labels))
	for l, g := range sf.Labels {
		lm[l] = map[string]any{"call": g.Call, "at": g.At.UTC().Format(time.RFC3339Nano), "tool": g.Tool,
			"type": string(g.Kind), "target": g.Target}
	}
	id := ""
	if f := a.call.SessionFacts; f != nil {
		id = f.ID
	}
	return types.DefaultTypeAdapter.NativeToValue(map[string]any{
		"id": id, "scope": a.scope, "labels": lm, "calls": int64(sf.Calls), "cost": sf.Cost, "tokens": sf.Tokens,
	})
}

// provenance says, for a decision a rule made, where the session labels
// it tests came from: "this session read /workspace/.env at 12:01:03
// (call X)". Empty for a rule that reads no session labels.
func (a *activation) provenance(r *rule) string {
	if !r.session {
		return ""
	}
	labels := a.scopeFacts().Labels
	var parts []string
	for _, l := range r.ofSession {
		g, ok := labels[l]
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s from %s %s at %s (call %s)", l, g.Tool, g.Target,
			g.At.UTC().Format(time.TimeOnly), g.Call))
	}
	if len(a.labels) > 0 {
		parts = append(parts, "this call gives "+strings.Join(a.labels, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	whose := "the agent's sessions: "
	if a.scope == config.ScopeSession {
		whose = "this session: "
	}
	return " — " + whose + strings.Join(parts, "; ")
}
