package policy

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// ExampleResult is one rule example's outcome.
type ExampleResult struct {
	Agent   string `json:"agent"`
	Rule    string `json:"rule"`
	Field   string `json:"field"` // e.g. agents.demo.rules[0].examples.match[2]
	Line    int    `json:"line"`
	Example string `json:"example"` // the call, rendered
	Want    bool   `json:"want_match"`
	Got     bool   `json:"matched"`
	Error   string `json:"error,omitempty"` // the rule errored (a deny rule then matches)
}

// Pass reports whether the rule did what the example says.
func (r ExampleResult) Pass() bool { return r.Want == r.Got }

func (r ExampleResult) String() string {
	verb := "matches"
	if !r.Got {
		verb = "does not match"
	}
	msg := fmt.Sprintf("rule %s %s %s", r.Rule, verb, r.Example)
	if r.Error != "" {
		msg += " (it errored: " + r.Error + ")"
	}
	return msg
}

// Test runs every rule example of every agent under cfg; a rule of the
// defaults is tested once, with the first agent (by name) that has it.
func Test(cfg *config.Config) ([]ExampleResult, error) {
	e, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	return e.examples(cfg), nil
}

// examples evaluates the examples in a stable order: agents by name,
// rules in file order.
func (e *Engine) examples(cfg *config.Config) []ExampleResult {
	names := make([]string, 0, len(e.agents))
	for n := range e.agents {
		names = append(names, n)
	}
	sort.Strings(names)
	nd := len(cfg.Defaults.Rules)
	seen := map[int]bool{} // defaults rules, by index
	var out []ExampleResult
	for _, name := range names {
		ap := e.agents[name]
		for i, r := range ap.rules {
			ex := ap.agent.Rules[i].Examples
			if ex == nil || r.prg == nil {
				continue
			}
			field := fmt.Sprintf("agents.%s.rules[%d].examples", name, i-nd)
			if i < nd {
				if seen[i] {
					continue
				}
				seen[i] = true
				field = fmt.Sprintf("defaults.rules[%d].examples", i)
			}
			for j, x := range ex.Match {
				out = append(out, ap.example(r, x, true, fmt.Sprintf("%s.match[%d]", field, j)))
			}
			for j, x := range ex.NotMatch {
				out = append(out, ap.example(r, x, false, fmt.Sprintf("%s.not_match[%d]", field, j)))
			}
		}
	}
	return out
}

func (ap *agentPolicy) example(r *rule, x config.Example, want bool, field string) ExampleResult {
	call := exampleCall(ap.name, x)
	res := ExampleResult{Agent: ap.name, Rule: r.name, Field: field, Line: x.Line, Example: renderExample(x), Want: want}
	for _, l := range x.Session {
		if !ap.given[l] {
			res.Error, res.Got = fmt.Sprintf("its session label %q is given by none of agent %s's session.labels", l, ap.name), !want
			return res
		}
	}
	act := ap.activate(call, call.Kind)
	defer putActivation(act)
	match, err := r.eval(act)
	if err != nil {
		res.Error = err.Error()
		match = r.deny || r.ask // as in decide: an erroring deny (or ask) rule fires
	}
	res.Got = match
	return res
}

// exampleCall builds the call an example describes, with the facts a
// tool's Prepare would have filled.
func exampleCall(agent string, x config.Example) *gateway.Call {
	c := &gateway.Call{Agent: agent, Tool: x.Tool, Kind: gateway.Kind(x.Kind),
		Command: x.Command, Argv: x.Argv, Path: x.Path, Host: x.Host, Port: x.Port}
	args := x.Args
	if args == nil {
		args = map[string]any{}
		switch {
		case x.Command != "":
			args["command"] = x.Command
		case x.Argv != nil:
			args["argv"] = x.Argv
		case x.Path != "":
			args["path"] = x.Path
		case x.Host != "":
			args["host"], args["port"] = x.Host, x.Port
		}
	}
	c.Args, _ = json.Marshal(args)
	if len(x.Session) > 0 {
		labels := make(map[string]gateway.Label, len(x.Session))
		for _, l := range x.Session {
			labels[l] = gateway.Label{Call: "example", Tool: "example"}
		}
		c.SessionFacts = &gateway.SessionFacts{Labels: labels, Agent: gateway.ScopeFacts{Labels: labels}}
	}
	if c.Tool == "" {
		switch {
		case x.Command != "" || x.Argv != nil:
			c.Tool = "exec"
		case x.Path != "":
			c.Tool = "read"
		case x.Host != "":
			c.Tool = "egress"
		}
	}
	if c.Kind == "" {
		switch {
		case c.Tool == "egress" || x.Host != "":
			c.Kind = gateway.KindEgress
		case isCore(c.Tool):
			c.Kind = gateway.KindCore
		default:
			c.Kind = gateway.KindTool
		}
	}
	return c
}

func isCore(tool string) bool {
	for _, t := range config.CoreTools {
		if t == tool {
			return true
		}
	}
	return false
}

func renderExample(x config.Example) string {
	m := map[string]any{}
	for k, v := range map[string]any{"tool": x.Tool, "kind": x.Kind, "command": x.Command, "path": x.Path, "host": x.Host} {
		if v != "" {
			m[k] = v
		}
	}
	if x.Argv != nil {
		m["argv"] = x.Argv
	}
	if x.Port != 0 {
		m["port"] = x.Port
	}
	if x.Args != nil {
		m["args"] = x.Args
	}
	if x.Session != nil {
		m["session"] = x.Session
	}
	if len(m) == 1 && x.Command != "" {
		return fmt.Sprintf("%q", x.Command)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// checkExamples turns failing examples into configuration errors.
func (e *Engine) checkExamples(cfg *config.Config) config.Errors {
	var errs config.Errors
	for _, r := range e.examples(cfg) {
		if !r.Pass() {
			want := "should match"
			if !r.Want {
				want = "should not match"
			}
			errs = append(errs, &config.Error{File: cfg.Path, Line: r.Line, Field: r.Field,
				Msg: fmt.Sprintf("example %s: %s", want, r)})
		}
	}
	return errs
}
