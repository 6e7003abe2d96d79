// Package suggest writes least-privilege policy from history: from the
// calls an agent made that were allowed (`toolgate policy suggest`), the
// commands and flags it ran, the directories it read and wrote, its plugin
// tools' argv shapes, the hosts it reached, the models it used and the
// Claude Code tools it called, as rules with examples drawn from the log,
// in a copy of the configuration file whose agent section says default
// deny. Replaying the window under the copy (`policy replay --config`)
// allows every call it learned from.
package suggest

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/policy"
	"github.com/toolgate/toolgate/internal/host/replay"
	"github.com/toolgate/toolgate/internal/host/shellfacts"
)

// Options say what to learn from.
type Options struct {
	Agent string
	Since time.Time // zero: the whole log
	Dir   string    // the audit directory
}

// Report is a suggestion: the candidate configuration and what it knows.
type Report struct {
	Calls    int // allowed calls learned from
	From, To time.Time
	Skipped  int // allowed entries that could not be read back as calls
	// Narrowed says what the configuration allows that the candidate
	// does not (tools, hosts, models and core tools never used).
	Narrowed []string
	Rules    int
	Config   []byte // the whole configuration file, the agent's section rewritten
}

// maxExamples is how many calls of the log each rule carries as examples.
const maxExamples = 3

// learned is what an agent's allowed calls did.
type learned struct {
	core      map[string]bool
	commands  map[string]map[string]bool // name → flags
	exact     []string                   // CEL tests of calls with a dynamic part or no parse: allowed as written only
	exactEx   []any
	cmdEx     []any           // examples of the commands rule
	reads     map[string]bool // directories
	writes    map[string]bool
	readEx    []any
	writeEx   []any
	plugins   map[string]map[string]bool // tool → first argv word ("" for none)
	pluginEx  map[string][]any
	hosts     map[string]bool
	models    map[string]bool
	hookTools map[string]bool
}

// Suggest learns from the agent's allowed calls in the log and rewrites
// its section of src, the configuration file cfg was loaded from; snap is
// cfg's, which reads the recorded calls back as their tools prepared them.
func Suggest(cfg *config.Config, src []byte, snap *gateway.Snapshot, o Options) (*Report, error) {
	a, ok := cfg.Agents[o.Agent]
	if !ok {
		return nil, fmt.Errorf("agent %q is not in the configuration", o.Agent)
	}
	l := &learned{core: map[string]bool{}, commands: map[string]map[string]bool{}, reads: map[string]bool{}, writes: map[string]bool{},
		plugins: map[string]map[string]bool{}, pluginEx: map[string][]any{}, hosts: map[string]bool{}, models: map[string]bool{}, hookTools: map[string]bool{}}
	r := &Report{}
	err := audit.Query(o.Dir, audit.Filter{Agent: o.Agent, Decision: gateway.VerdictAllow, Since: o.Since}, func(e *gateway.Entry) error {
		if !replay.Replayable(e) {
			return nil
		}
		call, refused := replay.Call(snap, e, nil)
		if refused != nil {
			r.Skipped++
			return nil
		}
		if r.Calls == 0 {
			r.From = e.TS
		}
		r.Calls++
		r.To = e.TS
		l.add(call)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r.Calls == 0 {
		return nil, fmt.Errorf("no allowed calls of agent %s in the log%s: nothing to learn from", o.Agent, since(o.Since))
	}
	r.Narrowed = l.narrowed(a)
	rules := l.rules(r)
	r.Rules = len(rules)
	if r.Config, err = rewrite(src, o.Agent, a, l, rules, r); err != nil {
		return nil, err
	}
	// The suggestion must load, its examples pass, as any config must.
	cand, err := config.Parse(cfg.Home, cfg.Path, r.Config)
	if err == nil {
		_, err = policy.New(cand)
	}
	if err != nil {
		return nil, fmt.Errorf("the suggested configuration does not load (a bug; please report it): %w", err)
	}
	return r, nil
}

func since(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " since " + t.UTC().Format(time.RFC3339)
}

func (l *learned) add(c *gateway.Call) {
	switch c.Kind {
	case gateway.KindCore:
		l.core[c.Tool] = true
		switch c.Tool {
		case "exec":
			l.addCommands(c, gateway.KindCore)
		case "read":
			l.addPath(l.reads, &l.readEx, c)
		case "write", "patch":
			l.addPath(l.writes, &l.writeEx, c)
		}
	case gateway.KindTool:
		words := l.plugins[c.Tool]
		if words == nil {
			words = map[string]bool{}
			l.plugins[c.Tool] = words
		}
		first := ""
		if len(c.Argv) > 0 {
			first = c.Argv[0]
		}
		if !words[first] && len(l.pluginEx[c.Tool]) < maxExamples {
			x := map[string]any{"tool": c.Tool}
			if len(c.Argv) > 0 {
				x["argv"] = c.Argv
			} else {
				x["args"] = c.ArgsMap()
			}
			l.pluginEx[c.Tool] = append(l.pluginEx[c.Tool], x)
		}
		words[first] = true
	case gateway.KindEgress:
		l.hosts[c.Host+":"+strconv.Itoa(c.Port)] = true
	case gateway.KindModel:
		if c.Model != nil && c.Model.Name != "" {
			l.models[c.Model.Name] = true
		}
	case gateway.KindHook:
		if c.Tool == "Bash" {
			l.addCommands(c, gateway.KindHook)
			return
		}
		l.hookTools[c.Tool] = true
	}
}

func (l *learned) addCommands(c *gateway.Call, kind gateway.Kind) {
	f := policy.Facts(c, kind)
	exact := f.ParseError != "" || slices.ContainsFunc(f.Commands, func(x shellfacts.Command) bool { return x.Dynamic || x.Name == "" })
	if exact {
		test := "command == " + quote(c.Command)
		if c.Command == "" {
			test = "argv == " + list(c.Argv)
		}
		if !slices.Contains(l.exact, test) {
			l.exact = append(l.exact, test)
			if len(l.exactEx) < maxExamples {
				l.exactEx = append(l.exactEx, commandExample(c, kind))
			}
		}
		return
	}
	fresh := false
	for _, x := range f.Commands {
		flags := l.commands[x.Name]
		if flags == nil {
			flags, fresh = map[string]bool{}, true
			l.commands[x.Name] = flags
		}
		for _, fl := range x.Flags {
			fresh = fresh || !flags[fl]
			flags[fl] = true
		}
	}
	if fresh && len(l.cmdEx) < maxExamples {
		l.cmdEx = append(l.cmdEx, commandExample(c, kind))
	}
}

func commandExample(c *gateway.Call, kind gateway.Kind) any {
	switch {
	case kind == gateway.KindHook:
		return map[string]any{"tool": "Bash", "kind": "hook", "command": c.Command}
	case c.Command != "":
		return c.Command
	}
	return map[string]any{"tool": "exec", "argv": c.Argv}
}

func (l *learned) addPath(dirs map[string]bool, ex *[]any, c *gateway.Call) {
	d := path.Dir(c.Path)
	if !dirs[d] && len(*ex) < maxExamples {
		*ex = append(*ex, map[string]any{"tool": c.Tool, "path": c.Path})
	}
	dirs[d] = true
}

// narrowed is what the agent may do that it did not.
func (l *learned) narrowed(a *config.Agent) []string {
	var out []string
	for _, t := range config.CoreTools {
		if a.CoreEnabled(t) && !l.core[t] {
			out = append(out, fmt.Sprintf("core.%s switched off: never used", t))
		}
	}
	for _, t := range a.Tools {
		if _, used := l.plugins[t]; !used {
			out = append(out, fmt.Sprintf("plugin tool %s dropped from tools: never called", t))
		}
	}
	if a.Egress != nil {
		for _, h := range a.Egress.Allow {
			if !l.hosts[h] {
				out = append(out, fmt.Sprintf("egress %s dropped: never reached as written (hosts reached are listed)", h))
			}
		}
	}
	if a.Model != nil && len(a.Model.Allow) == 0 {
		out = append(out, "model.allow was empty (any model): now the models used")
	}
	if a.Default != "deny" {
		out = append(out, "default: deny (was allow): a call no rule allows is denied")
	}
	return out
}

// rule is one suggested rule as the file gets it.
type rule struct {
	Name     string        `yaml:"name"`
	Allow    string        `yaml:"allow"`
	Reason   string        `yaml:"reason"`
	Examples *ruleExamples `yaml:"examples,omitempty"`
}

type ruleExamples struct {
	Match []any `yaml:"match"`
}

func (l *learned) rules(r *Report) []rule {
	window := fmt.Sprintf("between %s and %s", r.From.UTC().Format(time.DateTime), r.To.UTC().Format(time.DateTime))
	var out []rule
	add := func(name, expr, what string, ex []any) {
		rl := rule{Name: name, Allow: expr, Reason: what + " " + window + " (toolgate policy suggest)"}
		if len(ex) > 0 {
			rl.Examples = &ruleExamples{Match: ex}
		}
		out = append(out, rl)
	}
	if len(l.commands) > 0 {
		names := sorted(l.commands)
		var flags []string
		for _, n := range names {
			flags = append(flags, quote(n)+": "+list(sorted(l.commands[n])))
		}
		fm := "{" + strings.Join(flags, ", ") + "}"
		add("suggested.commands", fmt.Sprintf(`(tool == "exec" || (kind == "hook" && tool == "Bash")) && commands.all(c, c.name in %s && c.flags.all(f, f in %s[c.name]))`,
			list(names), fm), "the commands, and their flags, the agent ran", l.cmdEx)
	}
	if len(l.exact) > 0 {
		add("suggested.commands.exact", fmt.Sprintf(`(tool == "exec" || (kind == "hook" && tool == "Bash")) && (%s)`, strings.Join(l.exact, " || ")),
			"commands a shell parser cannot read whole (a name known only when they run), allowed only as written, that the agent ran", l.exactEx)
	}
	if len(l.reads) > 0 {
		add("suggested.read", fmt.Sprintf(`tool == "read" && %s`, under(l.reads)), "the directories the agent read files in", l.readEx)
	}
	if len(l.writes) > 0 {
		add("suggested.write", fmt.Sprintf(`tool in ["write", "patch"] && %s`, under(l.writes)), "the directories the agent wrote files in", l.writeEx)
	}
	for _, t := range sorted(l.plugins) {
		words := sorted(l.plugins[t])
		expr := fmt.Sprintf(`tool == %s`, quote(t))
		if !slices.Equal(words, []string{""}) {
			var alts []string
			if slices.Contains(words, "") {
				alts = append(alts, "size(argv) == 0")
				words = slices.DeleteFunc(words, func(w string) bool { return w == "" })
			}
			alts = append(alts, fmt.Sprintf("(size(argv) > 0 && argv[0] in %s)", list(words)))
			expr += " && (" + strings.Join(alts, " || ") + ")"
		}
		add("suggested.tool."+t, expr, "the subcommands of "+t+" the agent called", l.pluginEx[t])
	}
	if len(l.hookTools) > 0 {
		add("suggested.hook", fmt.Sprintf(`kind == "hook" && tool in %s`, list(sorted(l.hookTools))), "Claude Code's tools the agent used", nil)
	}
	return out
}

// under is a CEL test that path is a file directly in one of dirs: a
// directory the agent never touched, even beneath one it did, stays shut.
func under(dirs map[string]bool) string {
	var alts []string
	for _, d := range sorted(dirs) {
		alts = append(alts, regexp.QuoteMeta(strings.TrimSuffix(d, "/")))
	}
	return fmt.Sprintf("path.matches(%s)", quote("^("+strings.Join(alts, "|")+")/[^/]+$"))
}

// sorted is the keys of m in order.
func sorted[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// quote is a CEL string literal.
func quote(s string) string { return strconv.Quote(s) }

func list(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// rewrite is src with agent's section saying what l learned: default deny,
// the rules appended to its own, the plugin tools, hosts and models used,
// the core tools never used switched off. Comments elsewhere stay.
func rewrite(src []byte, agent string, a *config.Agent, l *learned, rules []rule, r *Report) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the configuration file is not a YAML mapping")
	}
	agents := child(doc.Content[0], "agents", yaml.MappingNode)
	an := child(agents, agent, yaml.MappingNode)
	an.HeadComment = fmt.Sprintf("Suggested by toolgate policy suggest from %d allowed calls between %s and %s.\nReview it, then: toolgate policy replay --config THIS_FILE --agent %s\nNarrowed:\n- %s",
		r.Calls, r.From.UTC().Format(time.RFC3339), r.To.UTC().Format(time.RFC3339), agent, strings.Join(r.Narrowed, "\n- "))
	set(an, "default", "deny")
	core := map[string]bool{}
	for _, t := range config.CoreTools {
		if !l.core[t] {
			core[t] = false
		}
	}
	if len(core) > 0 {
		cn := child(an, "core", yaml.MappingNode)
		for _, t := range sorted(core) {
			set(cn, t, false)
		}
	}
	set(an, "tools", orEmpty(sorted(l.plugins)))
	if a.Egress != nil {
		set(child(an, "egress", yaml.MappingNode), "allow", orEmpty(sorted(l.hosts)))
	}
	if a.Model != nil && len(l.models) > 0 {
		set(child(an, "model", yaml.MappingNode), "allow", sorted(l.models))
	}
	rn := child(an, "rules", yaml.SequenceNode)
	for _, rl := range rules {
		var n yaml.Node
		if err := n.Encode(rl); err != nil {
			return nil, err
		}
		rn.Content = append(rn.Content, &n)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// child is the value of key in mapping m, made (of kind) when missing.
func child(m *yaml.Node, key string, kind yaml.Kind) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind != kind { // null, or {} written as a scalar
				*v = yaml.Node{Kind: kind}
			}
			return v
		}
	}
	v := &yaml.Node{Kind: kind}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	return v
}

// set puts v under key in mapping m.
func set(m *yaml.Node, key string, v any) {
	var n yaml.Node
	_ = n.Encode(v) // strings, bools and lists of strings
	if n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			n.LineComment = m.Content[i+1].LineComment
			m.Content[i+1] = &n
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &n)
}
