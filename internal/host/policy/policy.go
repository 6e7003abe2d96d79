// Package policy decides tool calls: per agent, core tool switches, the
// plugin tool allowlist, and CEL rules where any matching deny wins.
package policy

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// Engine is the compiled policy of every agent. It is immutable and safe for
// concurrent use; a reload builds a new Engine and swaps it in.
type Engine struct {
	agents  map[string]*agentPolicy
	version string // the configuration's digest, shortened: Decision.Policy
}

type agentPolicy struct {
	name    string
	agent   *config.Agent
	core    map[string]bool // core tool → switched on
	rules   []*rule         // file order, for Explain
	denies  []*rule         // file order
	allows  []*rule         // file order
	asks    []*rule         // file order
	shadows []*rule         // mode: shadow, file order; never enforced
	dflt    gateway.Decision
	egress  *netrule.Policy // nil: the agent has no egress
	// connectors are the MCP servers a model provider may be asked to
	// reach for the agent: model.connectors, else the egress allowlist.
	connectors []netrule.Rule
	givers     []*giver        // session.labels, file order
	given      map[string]bool // every label a giver names
	scope      string          // config.ScopeAgent or config.ScopeSession
}

type rule struct {
	name   string
	reason string
	expr   string
	deny   bool
	ask    bool
	shadow bool
	line   int
	prg    cel.Program
	// session: the rule reads the session's facts; labels are the label
	// names it tests (named in the reason of a decision it makes).
	session   bool
	labels    []string
	ofSession []string
}

var _ gateway.Decider = (*Engine)(nil)

// newEnv declares the variables a rule sees (see DESIGN.md, Policy).
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("agent", cel.StringType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("kind", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("path", cel.StringType),
		cel.Variable("command", cel.StringType),
		cel.Variable("argv", cel.ListType(cel.StringType)),
		cel.Variable("host", cel.StringType),
		cel.Variable("port", cel.IntType),
		// Shell facts (internal/host/shellfacts): every command a script or argv runs.
		cel.Variable("commands", cel.ListType(cel.MapType(cel.StringType, cel.DynType))),
		cel.Variable("parse_error", cel.StringType),
		// Session facts (internal/host/session): what the call's session
		// was given before it, and the labels the call itself gives.
		cel.Variable("session", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("labels", cel.ListType(cel.StringType)),
		// JSON numbers in args are doubles; let `args.timeout > 60` work.
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
	)
}

// New compiles every agent's rules once and runs their examples. Bad or
// non-boolean expressions and failing examples are reported together as
// config.Errors, located at the rule's (or example's) line.
func New(cfg *config.Config) (*Engine, error) {
	e, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	if errs := e.checkExamples(cfg); len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return e, nil
}

func compile(cfg *config.Config) (*Engine, error) {
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	e := &Engine{agents: make(map[string]*agentPolicy, len(cfg.Agents)), version: cfg.Digest[:min(len(cfg.Digest), 16)]}
	c := compiler{env: env, file: cfg.Path, cache: map[string]*compiled{}}
	nd := len(cfg.Defaults.Rules)
	for name, a := range cfg.Agents {
		ap := &agentPolicy{
			name:  name,
			agent: a,
			core:  make(map[string]bool, len(config.CoreTools)),
			dflt: gateway.Decision{Allow: a.Default != "deny", Rule: "default",
				Reason: fmt.Sprintf("no rule matched; agent %s defaults to %s", name, or(a.Default, "allow"))},
		}
		if a.Egress != nil {
			p := a.Egress.Policy()
			ap.egress = &p
			ap.connectors = p.Allow
		}
		if a.Model != nil && a.Model.Connectors != nil {
			ap.connectors, _ = netrule.ParseRules(a.Model.Connectors) // checked by config.Load
		}
		for _, t := range config.CoreTools {
			ap.core[t] = a.CoreEnabled(t)
		}
		ap.compileGivers(&c, cfg, name)
		for i, r := range a.Rules {
			// Load puts the defaults' rules first; name errors where they are written.
			field := fmt.Sprintf("agents.%s.rules[%d]", name, i-nd)
			if i < nd {
				field = fmt.Sprintf("defaults.rules[%d]", i)
			}
			rl := &rule{name: ruleName(r, i), reason: r.Reason, line: r.Line, expr: r.Allow}
			switch {
			case r.Deny != "":
				rl.deny, rl.expr, field = true, r.Deny, field+".deny"
			case r.Ask != "":
				rl.ask, rl.expr, field = true, r.Ask, field+".ask"
			default:
				field += ".allow"
			}
			x := c.compile(rl.expr, r.Line, field)
			rl.prg, rl.session, rl.labels, rl.ofSession = x.prg, x.session, x.labels, x.ofSession
			ap.checkLabels(&c, x, r.Line, field)
			rl.shadow = r.Mode == "shadow"
			ap.rules = append(ap.rules, rl)
			switch {
			case rl.shadow:
				ap.shadows = append(ap.shadows, rl)
			case rl.deny:
				ap.denies = append(ap.denies, rl)
			case rl.ask:
				ap.asks = append(ap.asks, rl)
			default:
				ap.allows = append(ap.allows, rl)
			}
		}
		e.agents[name] = ap
	}
	if len(c.errs) > 0 {
		c.errs.Sort()
		return nil, c.errs
	}
	return e, nil
}

// ruleName is how decisions and the audit log name a rule.
func ruleName(r config.Rule, i int) string {
	switch {
	case r.Name != "":
		return r.Name
	case r.ID != "":
		return r.ID
	}
	return fmt.Sprintf("rules[%d]", i)
}

type compiled struct {
	prg cel.Program
	err bool
	// What the expression reads of the session (sessionRefs).
	session           bool
	labels, ofSession []string
}

// compiler compiles each distinct expression once (the defaults' rules are
// shared by every agent) and reports each bad one once.
type compiler struct {
	env   *cel.Env
	file  string
	cache map[string]*compiled
	errs  config.Errors
}

func (c *compiler) compile(expr string, line int, field string) *compiled {
	if hit, ok := c.cache[expr]; ok {
		return hit
	}
	hit := &compiled{}
	c.cache[expr] = hit
	fail := func(msg string) {
		hit.err = true
		c.errs = append(c.errs, &config.Error{File: c.file, Line: line, Field: field, Msg: msg})
	}
	ast, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		for _, ce := range iss.Errors() {
			fail(fmt.Sprintf("%s: %s", position(ce.Location.Line(), ce.Location.Column()), ce.Message))
		}
		return hit
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		fail(fmt.Sprintf("the expression is of type %s; a rule must be a bool", t))
		return hit
	}
	prg, err := c.env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		fail(err.Error())
		return hit
	}
	hit.prg = prg
	hit.session, hit.labels, hit.ofSession = sessionRefs(ast)
	return hit
}

// position renders a CEL location (1-based line, 0-based column) inside the
// expression.
func position(line, col int) string {
	if line <= 1 {
		return fmt.Sprintf("CEL column %d", col+1)
	}
	return fmt.Sprintf("CEL line %d, column %d of the expression", line, col+1)
}

// Decide implements gateway.Decider.
func (e *Engine) Decide(call *gateway.Call) gateway.Decision {
	d := e.decide(call, nil)
	d.Policy = e.version
	return d
}

// Explanation is a decision with every rule evaluated on the way.
type Explanation struct {
	Decision gateway.Decision
	Rules    []RuleResult // file order; empty when a check before the rules decided
}

// RuleResult is one rule's outcome for one call.
type RuleResult struct {
	Name   string
	Effect string // deny or allow
	Expr   string
	Line   int
	Result string // true, false or error
	Error  string
}

// Explain decides call like Decide, but evaluates every rule and reports each
// result: the dry run behind `toolgate policy eval`.
func (e *Engine) Explain(call *gateway.Call) Explanation {
	var x Explanation
	x.Decision = e.decide(call, &x)
	x.Decision.Policy = e.version
	return x
}

func (e *Engine) decide(call *gateway.Call, x *Explanation) gateway.Decision {
	ap, ok := e.agents[call.Agent]
	if !ok {
		return gateway.Decision{Rule: "agent.unknown", Reason: fmt.Sprintf("unknown agent %q", call.Agent)}
	}
	dflt := ap.dflt
	kind := call.Kind
	if kind == "" {
		kind = gateway.KindTool
		if _, core := ap.core[call.Tool]; core {
			kind = gateway.KindCore
		}
	}
	switch kind {
	case gateway.KindCore:
		if !ap.core[call.Tool] {
			return gateway.Decision{Rule: "core." + call.Tool,
				Reason: fmt.Sprintf("core tool %q is switched off for agent %s", call.Tool, ap.name)}
		}
	case gateway.KindTool:
		if !ap.agent.AllowsTool(call.Tool) {
			return gateway.Decision{Rule: "tools.allowlist",
				Reason: fmt.Sprintf("tool %q is not in agent %s's tools", call.Tool, ap.name)}
		}
	case gateway.KindEgress:
		// The allowlist and the pinned answer first; rules may still deny,
		// and an allowlisted destination needs no allow rule.
		if ap.egress == nil {
			return gateway.Decision{Rule: netrule.RuleAllowlist, Reason: fmt.Sprintf("agent %s has no egress configured", ap.name)}
		}
		if dflt = ap.egress.Decide(call); !dflt.Allow {
			return dflt
		}
	case gateway.KindModel:
		// The provider, the model allowlist and the budget first; rules may
		// still deny, and an allowed model needs no allow rule.
		if dflt = decideModel(ap, call); !dflt.Allow {
			return dflt
		}
	case gateway.KindHook:
		// Decided by the rules alone.
	default:
		return gateway.Decision{Rule: "kind.unknown", Reason: fmt.Sprintf("calls of kind %q are not decided by policy", kind)}
	}

	act := ap.activate(call, kind)
	defer putActivation(act)
	var d gateway.Decision
	if x != nil {
		d = ap.explain(act, x, dflt)
	} else {
		d = ap.enforce(act, dflt)
	}
	d.Shadow = ap.shadow(act, d, dflt)
	d.Labels = act.labels
	return d
}

// activate exposes a call to the agent's rules, with the labels its
// givers give it.
func (ap *agentPolicy) activate(call *gateway.Call, kind gateway.Kind) *activation {
	act := getActivation(call, kind)
	act.scope = ap.scope
	act.labels = ap.give(act)
	act.vals[vLabels] = nil // a giver that read labels saw none yet
	return act
}

func (ap *agentPolicy) enforce(act *activation, dflt gateway.Decision) gateway.Decision {
	for _, r := range ap.denies {
		if match, err := r.eval(act); match || err != nil {
			return r.denial(act, err)
		}
	}
	for _, r := range ap.asks {
		// Like a deny, an ask that cannot be evaluated asks.
		if match, err := r.eval(act); match || err != nil {
			return r.asking(act)
		}
	}
	for _, r := range ap.allows {
		if match, err := r.eval(act); match && err == nil {
			return r.allowing(act)
		}
	}
	return dflt
}

func (r *rule) asking(act *activation) gateway.Decision {
	return gateway.Decision{Ask: true, Rule: r.name, Reason: r.reason + act.provenance(r)}
}

func (r *rule) allowing(act *activation) gateway.Decision {
	return gateway.Decision{Allow: true, Rule: r.name, Reason: r.reason + act.provenance(r)}
}

// shadow evaluates the shadow-mode rules and says what the decision would
// have been with them enforced: a matching shadow deny denies unless an
// enforced deny already did; a matching shadow allow takes the place of the
// default. Nil when none matched.
func (ap *agentPolicy) shadow(act *activation, d, dflt gateway.Decision) *gateway.Shadow {
	if len(ap.shadows) == 0 {
		return nil
	}
	var s *gateway.Shadow
	would := d
	for _, r := range ap.shadows {
		match, err := r.eval(act)
		hit := match && err == nil
		if r.deny || r.ask {
			hit = match || err != nil
		}
		if !hit {
			continue
		}
		if s == nil {
			s = &gateway.Shadow{}
		}
		s.Matched = append(s.Matched, r.name)
		byDefault := would.Allow == dflt.Allow && would.Rule == dflt.Rule
		switch {
		case r.deny && (would.Allow || would.Ask || byDefault):
			would = r.denial(act, err)
		case r.ask && (would.Allow || byDefault):
			would = r.asking(act)
		case !r.deny && byDefault:
			would = r.allowing(act)
		}
	}
	if s != nil {
		s.Verdict, s.Rule, s.Reason = would.Verdict(), would.Rule, would.Reason
	}
	return s
}

// explain evaluates all rules and reaches the same decision as the fast path.
func (ap *agentPolicy) explain(act *activation, x *Explanation, dflt gateway.Decision) gateway.Decision {
	var deny, ask, allow *gateway.Decision
	for _, r := range ap.rules {
		match, err := r.eval(act)
		res := RuleResult{Name: r.name, Effect: "allow", Expr: r.expr, Line: r.line, Result: fmt.Sprint(match)}
		switch {
		case r.deny:
			res.Effect = "deny"
		case r.ask:
			res.Effect = "ask"
		}
		if r.shadow {
			res.Effect += "/shadow"
		}
		if err != nil {
			res.Result, res.Error = "error", err.Error()
		}
		x.Rules = append(x.Rules, res)
		switch {
		case r.shadow:
		case r.deny && (match || err != nil) && deny == nil:
			d := r.denial(act, err)
			deny = &d
		case r.ask && (match || err != nil) && ask == nil:
			d := r.asking(act)
			ask = &d
		case !r.deny && match && err == nil && allow == nil:
			d := r.allowing(act)
			allow = &d
		}
	}
	switch {
	case deny != nil:
		return *deny
	case ask != nil:
		return *ask
	case allow != nil:
		return *allow
	}
	return dflt
}

// denial is the decision of a matching deny rule. A deny rule that cannot
// be evaluated denies too: a rule meant to stop a call must not let it
// through because the call lacked what the rule looked at.
func (r *rule) denial(act *activation, err error) gateway.Decision {
	d := gateway.Decision{Rule: r.name, Reason: r.reason}
	if err != nil {
		d.Reason = fmt.Sprintf("%s (the rule errored, so it denies: %v)", r.reason, err)
	}
	d.Reason += act.provenance(r)
	return d
}

func (r *rule) eval(act *activation) (bool, error) { return evalBool(r.prg, act) }

func evalBool(prg cel.Program, act *activation) (bool, error) {
	out, _, err := prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the rule returned %s, not a bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// String renders the explanation for a terminal.
func (x Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decision: %s by %s: %s\n", x.Decision.Verdict(), x.Decision.Rule, x.Decision.Reason)
	if s := x.Decision.Shadow; s != nil {
		fmt.Fprintf(&b, "shadow: would be %s by %s (matched: %s)\n", s.Verdict, s.Rule, strings.Join(s.Matched, ", "))
	}
	if len(x.Rules) == 0 {
		return b.String()
	}
	b.WriteString("rules (file order):\n")
	width := 0
	for _, r := range x.Rules {
		width = max(width, len(r.Name))
	}
	for _, r := range x.Rules {
		fmt.Fprintf(&b, "  %-*s  %-5s  %-5s  line %-4d  %s\n", width, r.Name, r.Effect, r.Result, r.Line, oneLine(r.Expr))
		if r.Error != "" {
			fmt.Fprintf(&b, "  %*s  error: %s\n", width, "", r.Error)
		}
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
