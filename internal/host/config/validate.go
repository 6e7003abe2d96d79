package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/toolgate/toolgate/internal/proto"
)

// Built-in defaults, applied after Config.Defaults.
const (
	DefaultImage       = proto.DefaultImage
	DefaultUser        = proto.DefaultUser
	DefaultMemory      = "512m"
	DefaultCPUs        = 1.0
	DefaultPids        = 256
	DefaultExecTimeout = 10 * time.Minute
	DefaultAskTimeout  = 2 * time.Minute
	DefaultMaxOutput   = 1 << 20
	DefaultMaxReadFile = 10 << 20
	DefaultMaxWrite    = 64 << 20
	DefaultAuditFile   = 64 << 20
	DefaultMaxArgBytes = 1024
)

// rateKinds are the call kinds a rate may select.
var rateKinds = []string{"core_tool", "tool", "hook", "egress", "model"}

// minMemory is the smallest memory limit Docker accepts.
const minMemory = 6 << 20

// CoreTools are the tools that act inside the sandbox.
var CoreTools = []string{"read", "write", "patch", "exec"}

// Compiled on first use, not at start: every CLI command links this package.
var (
	agentName  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) })
	pluginName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`) }) // becomes /tools/bin/NAME
	ruleName   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$`) })
	labelName  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`) })
	userSpec   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)
	})
	envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
)

// CoreEnabled reports whether core tool tool is switched on; names that are
// not core tools are never enabled.
func (a *Agent) CoreEnabled(tool string) bool {
	var p *bool
	switch tool {
	case "read":
		p = a.Core.Read
	case "write":
		p = a.Core.Write
	case "patch":
		p = a.Core.Patch
	case "exec":
		p = a.Core.Exec
	default:
		return false
	}
	return p == nil || *p
}

// AllowsTool reports whether the agent's tools list admits plugin tool name.
func (a *Agent) AllowsTool(name string) bool { return ListAllows(a.Tools, name) }

// ListAllows is the allowlist rule: a tool is admitted when the list names
// it, or — an upstream MCP server's tools are named SERVER.TOOL — when the
// list names its server.
func ListAllows(list []string, name string) bool {
	server, _, _ := strings.Cut(name, ".")
	return slices.Contains(list, name) || slices.Contains(list, server)
}

// MemoryBytes is the memory limit in bytes (0 if Limits.Memory is unset or invalid,
// which Load never returns).
func (a *Agent) MemoryBytes() int64 {
	n, _ := parseSize(a.Limits.Memory)
	return n
}

// finish checks what the decoder could not (names, references, ranges) and
// fills the defaults: Config.Defaults first, then the built-in ones.
func (d *decoder) finish(c *Config) {
	d.gateway(c)
	d.plugins(c.Plugins)
	if d.set("defaults.workspace") {
		d.errorf(d.at("defaults.workspace"), "defaults.workspace", "a workspace belongs to one agent; set it under agents.NAME")
	}
	d.agent("defaults", &c.Defaults, c.Plugins, c.Home)
	d.egress("defaults.egress", c.Defaults.Egress)
	d.models(c)
	d.agentModel("defaults.model", c.Defaults.Model, c.Gateway.Models)

	workspaces := map[string]string{}
	for _, name := range sortedKeys(c.Agents) {
		path := join("agents", name)
		if !agentName().MatchString(name) {
			d.errorf(d.at(path), path, "agent names are 1-63 lowercase letters, digits, _ or -, starting with a letter or digit")
		}
		a := c.Agents[name]
		if a == nil {
			a = &Agent{}
			c.Agents[name] = a
		}
		d.agent(path, a, c.Plugins, c.Home)
		d.egress(path+".egress", a.Egress)
		d.agentModel(path+".model", a.Model, c.Gateway.Models)
		merge(a, &c.Defaults)
		mergeEgress(a, &c.Defaults)
		mergeModel(a, &c.Defaults)
		builtins(a, c.Home, name)
		builtinEgress(a.Egress)
		d.ruleIDs(path, a)
		if other, dup := workspaces[a.Workspace]; dup {
			d.errorf(d.at(path+".workspace"), path+".workspace", "%s is also the workspace of agent %s", a.Workspace, other)
		}
		workspaces[a.Workspace] = name
	}
	d.gatewayEgress(c)
	d.sandbox(c)
}

func (d *decoder) gateway(c *Config) {
	g := &c.Gateway
	if g.Listen != "" {
		if _, _, err := net.SplitHostPort(g.Listen); err != nil {
			d.errorf(d.at("gateway.listen"), "gateway.listen", "%q is not host:port (e.g. 127.0.0.1:7433)", g.Listen)
		}
	}
	g.ClientBinary = d.hostPath("gateway.clientBinary", g.ClientBinary, c.Home)
	g.Audit.Dir = d.hostPath("gateway.audit.dir", g.Audit.Dir, c.Home)
	if g.Audit.Dir == "" {
		g.Audit.Dir = filepath.Join(c.Home, "logs")
	}
	d.positive("gateway.audit.maxFileBytes", g.Audit.MaxFileBytes)
	d.positive("gateway.audit.maxArgBytes", int64(g.Audit.MaxArgBytes))
	d.positive("gateway.audit.checkpointEvery", int64(g.Audit.CheckpointEvery))
	d.positive("gateway.audit.checkpointInterval", int64(g.Audit.CheckpointInterval))
	for i, w := range g.Audit.Witnesses {
		path := fmt.Sprintf("gateway.audit.witnesses[%d]", i)
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.errorf(d.at(path+".url"), path+".url", "want the witness's http(s) URL, e.g. http://127.0.0.1:7434")
		}
		if _, err := note.NewVerifier(w.Key); err != nil {
			d.errorf(d.at(path+".key"), path+".key", "want the witness's verifier key (its toolgate witness prints it): %v", err)
		}
	}
	g.Audit.MaxFileBytes = or(g.Audit.MaxFileBytes, DefaultAuditFile)
	g.Audit.MaxArgBytes = or(g.Audit.MaxArgBytes, DefaultMaxArgBytes)
	d.otlp(g.Telemetry.OTLP)
	d.approvals(g)
	if pg := g.Audit.Postgres; pg != nil {
		const path = "gateway.audit.postgres.dsn"
		// Never quote the DSN back: it may hold a password.
		switch dsn := strings.TrimSpace(pg.DSN); {
		case dsn == "":
			d.errorf(d.at("gateway.audit.postgres"), path, "required: the fleet database, e.g. postgres://toolgate:{{secret:pg_password}}@db.internal:5432/toolgate")
		case !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") && !strings.Contains(dsn, "="):
			d.errorf(d.at(path), path, "not a connection string: a postgres:// URL or key=value pairs (host=… dbname=…)")
		}
	}
}

// Notifier defaults.
const (
	DefaultNotifyTimeout  = 5 * time.Second
	DefaultNotifyAttempts = 3
)

// approvals checks the notifiers and where their links point.
func (d *decoder) approvals(g *Gateway) {
	a := &g.Approvals
	if a.LinkBase != "" {
		if u, err := url.Parse(a.LinkBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			d.errorf(d.at("gateway.approvals.linkBase"), "gateway.approvals.linkBase", "want the http(s) URL at which approvers reach this gateway, e.g. https://toolgate.example.com")
		}
	}
	if len(a.Notify) > 0 && a.LinkBase == "" {
		if g.Listen == "" {
			d.errorf(d.at("gateway.approvals.notify"), "gateway.approvals.notify", "notifiers send links to this gateway: set gateway.listen (or gateway.approvals.linkBase)")
		}
		a.LinkBase = "http://" + g.Listen
	}
	a.LinkBase = strings.TrimSuffix(a.LinkBase, "/")
	names := map[string]bool{}
	for i := range a.Notify {
		n, path := &a.Notify[i], fmt.Sprintf("gateway.approvals.notify[%d]", i)
		if n.Kind != NotifyWebhook && n.Kind != NotifySlack {
			d.errorf(d.at(path+".kind"), path+".kind", "%q: a notifier is webhook or slack", n.Kind)
		}
		n.Name = or(n.Name, fmt.Sprintf("%s-%d", n.Kind, i))
		if !agentName().MatchString(n.Name) {
			d.errorf(d.at(path+".name"), path+".name", "%q: names are 1-63 lowercase letters, digits, _ or -", n.Name)
		} else if names[n.Name] {
			d.errorf(d.at(path+".name"), path+".name", "two notifiers are named %q", n.Name)
		}
		names[n.Name] = true
		if err := checkNotifyURL(n.URL); err != nil {
			d.errorf(d.at(path+".url"), path+".url", "%v", err)
		}
		d.positive(path+".timeout", int64(n.Timeout))
		d.positive(path+".attempts", int64(n.Attempts))
		n.Timeout = or(n.Timeout, DefaultNotifyTimeout)
		n.Attempts = or(n.Attempts, DefaultNotifyAttempts)
	}
}

// checkNotifyURL accepts https, and plain http only to a loopback
// address: an ask carries the call's facts, which must not cross a
// network in clear text. A URL holding a secret is never quoted back.
func checkNotifyURL(s string) error {
	if strings.Contains(s, "{{secret:") {
		s = secretRef().ReplaceAllString(s, "x")
	}
	u, err := url.Parse(s)
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("required: where asks are POSTed")
	case err != nil || u.Host == "":
		return fmt.Errorf("not an http(s) URL")
	case u.Scheme == "https":
		return nil
	case u.Scheme != "http":
		return fmt.Errorf("want https (or http to a loopback address), not %s", u.Scheme)
	}
	if ip := net.ParseIP(u.Hostname()); (ip == nil || !ip.IsLoopback()) && u.Hostname() != "localhost" {
		return fmt.Errorf("http to %s would send the asked call's facts in clear text off this host: use https", u.Hostname())
	}
	return nil
}

var secretRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{\{secret:[^}]*\}\}`) })

// otlp checks the trace exporter's settings; the endpoint is never
// dialled here, an unreachable collector only loses traces.
func (d *decoder) otlp(o *OTLP) {
	if o == nil {
		return
	}
	const path = "gateway.telemetry.otlp"
	switch o.Protocol {
	case "":
		o.Protocol = OTLPHTTP
	case OTLPHTTP, OTLPGRPC:
	default:
		d.errorf(d.at(path+".protocol"), path+".protocol", "%q is neither http nor grpc", o.Protocol)
	}
	ep := strings.TrimSpace(o.Endpoint)
	if ep == "" {
		d.errorf(d.at(path), path+".endpoint", "required: the collector, e.g. otel-collector.internal:4318")
		return
	}
	if !strings.Contains(ep, "://") {
		if _, port, err := net.SplitHostPort(ep); err != nil || port == "" {
			d.errorf(d.at(path+".endpoint"), path+".endpoint", "%q is neither host:port nor an http(s):// URL", ep)
		}
		return
	}
	u, err := url.Parse(ep)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		// Not quoted back: a URL may carry a credential.
		d.errorf(d.at(path+".endpoint"), path+".endpoint", "not an http(s):// URL with a host")
	case u.User != nil:
		d.errorf(d.at(path+".endpoint"), path+".endpoint", "credentials do not belong in the URL; set OTEL_EXPORTER_OTLP_HEADERS in the daemon's environment")
	case u.Scheme == "https" && o.Insecure:
		d.errorf(d.at(path+".insecure"), path+".insecure", "the endpoint is https://; insecure (plain text) contradicts it")
	}
}

func (d *decoder) plugins(ps map[string]Plugin) {
	for _, name := range sortedKeys(ps) {
		p, path := ps[name], join("plugins", name)
		switch {
		case slices.Contains(CoreTools, name):
			d.errorf(d.at(path), path, "%s is a core tool; a plugin cannot take its name", name)
		case !pluginName().MatchString(name):
			d.errorf(d.at(path), path, "plugin names are 1-63 lowercase letters, digits, _, . or -, starting with a letter or digit")
		default:
			// SERVER.TOOL names a tool of plugin SERVER, and listing SERVER
			// allows all of them: a plugin of that form would be granted to
			// every agent that lists SERVER.
			if server, _, ok := strings.Cut(name, "."); ok {
				if _, clash := ps[server]; clash {
					d.errorf(d.at(path), path, "%s reads as a tool of plugin %s (SERVER.TOOL), so every agent listing %s would get it; rename it", name, server, server)
				}
			}
		}
		if p.Kind == "" {
			d.errorf(d.at(path+".kind"), path+".kind", "required (e.g. command, builtin)")
		}
		if p.Kind == "command" && p.Command == "" {
			d.errorf(d.at(path+".command"), path+".command", "required for kind command")
		}
		if p.Cwd != "" && p.Cwd != "workspace" && !filepath.IsAbs(p.Cwd) {
			d.errorf(d.at(path+".cwd"), path+".cwd", "%q is neither \"workspace\" nor an absolute host path", p.Cwd)
		}
		for _, k := range sortedKeys(p.Env) {
			if !envName().MatchString(k) {
				kp := join(path+".env", k)
				d.errorf(d.at(kp), kp, "not a valid environment variable name")
			}
		}
		if p.Timeout < 0 {
			d.errorf(d.at(path+".timeout"), path+".timeout", "must not be negative")
		}
	}
}

// agent checks the fields an agent (or the defaults) sets itself, before merging.
func (d *decoder) agent(path string, a *Agent, plugins map[string]Plugin, home string) {
	a.Workspace = d.hostPath(path+".workspace", a.Workspace, home)
	if a.User != "" && !userSpec().MatchString(a.User) {
		d.errorf(d.at(path+".user"), path+".user", "%q is not uid:gid (e.g. 1000:1000)", a.User)
	}
	if a.Default != "" && a.Default != "allow" && a.Default != "deny" {
		d.errorf(d.at(path+".default"), path+".default", "%q is neither allow nor deny", a.Default)
	}

	l, lp := &a.Limits, path+".limits"
	if l.Memory != "" {
		if n, err := parseSize(l.Memory); err != nil {
			d.errorf(d.at(lp+".memory"), lp+".memory", "%q is not a size (e.g. 512m, 2g)", l.Memory)
		} else if n < minMemory {
			d.errorf(d.at(lp+".memory"), lp+".memory", "%q is below Docker's minimum of 6m", l.Memory)
		}
	}
	if d.set(lp+".cpus") && (l.CPUs <= 0 || l.CPUs > 1024) {
		d.errorf(d.at(lp+".cpus"), lp+".cpus", "%g is not between 0 and 1024", l.CPUs)
	}
	d.positive(lp+".pids", l.Pids)
	d.positive(lp+".execTimeout", int64(l.ExecTimeout))
	d.positive(path+".askTimeout", int64(a.AskTimeout))
	for i, r := range a.Rates {
		rp := fmt.Sprintf("%s.rates[%d]", path, i)
		switch {
		case r.Tool != "" && r.Kind != "":
			d.errorf(d.at(rp), rp, "a rate selects calls by tool or by kind, not both")
		case r.Kind != "" && !slices.Contains(rateKinds, r.Kind):
			d.errorf(d.at(rp+".kind"), rp+".kind", "%q: kinds are %s", r.Kind, strings.Join(rateKinds, ", "))
		}
		if r.PerMinute == 0 && r.Concurrent == 0 && r.BytesPerDay == 0 {
			d.errorf(d.at(rp), rp, "a rate needs perMinute, concurrent or bytesPerDay")
		}
		if r.PerMinute < 0 || r.Concurrent < 0 || r.BytesPerDay < 0 {
			d.errorf(d.at(rp), rp, "limits are positive numbers")
		}
		if r.BytesPerDay > 0 && r.Kind != "egress" && r.Tool != "egress" {
			d.errorf(d.at(rp+".bytesPerDay"), rp+".bytesPerDay", "bytesPerDay counts egress bytes: use it with kind: egress")
		}
	}
	d.positive(lp+".maxOutput", l.MaxOutput)
	d.positive(lp+".maxReadFile", l.MaxReadFile)
	d.positive(lp+".maxWrite", l.MaxWrite)

	seen := map[string]bool{}
	for i, t := range a.Tools {
		tp := fmt.Sprintf("%s.tools[%d]", path, i)
		server, _, _ := strings.Cut(t, ".") // SERVER.TOOL names one tool of an upstream MCP server
		_, ok := plugins[t]
		if !ok {
			_, ok = plugins[server]
		}
		switch {
		case seen[t]:
			d.errorf(d.at(tp), tp, "%q is listed twice", t)
		case slices.Contains(CoreTools, t):
			d.errorf(d.at(tp), tp, "%q is a core tool; switch it with core.%s, not tools", t, t)
		case !ok:
			d.errorf(d.at(tp), tp, "tool %q is not declared under plugins", t)
		}
		seen[t] = true
	}

	for i, r := range a.Rules {
		rp := fmt.Sprintf("%s.rules[%d]", path, i)
		switch n := btoi(r.Deny != "") + btoi(r.Allow != "") + btoi(r.Ask != ""); {
		case n == 0:
			d.errorf(d.at(rp), rp, "a rule needs one of deny, allow or ask (a CEL expression)")
		case n > 1:
			d.errorf(d.at(rp), rp, "a rule has one of deny, allow or ask, not several; split it into rules")
		}
		if strings.TrimSpace(r.Reason) == "" {
			d.errorf(d.at(rp), rp+".reason", "required: say why, it is shown to the agent and in the audit log")
		}
		if r.Mode != "" && r.Mode != "enforce" && r.Mode != "shadow" {
			d.errorf(d.at(rp+".mode"), rp+".mode", "%q: a rule's mode is enforce (the default) or shadow", r.Mode)
		}
		if r.Name != "" && !ruleName().MatchString(r.Name) {
			d.errorf(d.at(rp+".name"), rp+".name", "%q: rule names are letters, digits and _ . : / -", r.Name)
		}
	}
	d.session(path+".session", &a.Session)
}

// session checks a session section as written; its expressions are
// compiled by policy.
func (d *decoder) session(path string, s *Session) {
	if s.Scope != "" && s.Scope != ScopeAgent && s.Scope != ScopeSession {
		d.errorf(d.at(path+".scope"), path+".scope", "%q: the scope of session labels is agent (the default) or session", s.Scope)
	}
	if b := s.Budget; b != nil {
		if b.Cost < 0 || b.Tokens < 0 || b.Calls < 0 || b.Wall < 0 {
			d.errorf(d.at(path+".budget"), path+".budget", "a budget's caps must not be negative (0 or unset: no cap)")
		}
	}
	for i, l := range s.Labels {
		lp := fmt.Sprintf("%s.labels[%d]", path, i)
		if !labelName().MatchString(l.Label) {
			d.errorf(d.at(lp+".label"), lp+".label", "%q: a label is 1-32 lowercase letters, digits, _ or -, starting with a letter", l.Label)
		}
		if strings.TrimSpace(l.When) == "" {
			d.errorf(d.at(lp), lp+".when", "required: a CEL expression over the call that gives the label")
		}
	}
}

// ruleIDs names the merged rules and refuses two rules of one name, which
// would make audit entries ambiguous.
func (d *decoder) ruleIDs(path string, a *Agent) {
	seen := map[string]bool{}
	for i := range a.Rules {
		r := &a.Rules[i]
		if r.Name != "" {
			r.ID = r.Name
		}
		if seen[r.ID] {
			d.errs = append(d.errs, &Error{File: d.file, Line: r.Line, Field: path + ".rules",
				Msg: fmt.Sprintf("two rules are named %q", r.ID)})
		}
		seen[r.ID] = true
	}
}

// merge applies the defaults section to an agent: scalars and limits the
// agent leaves unset, its tool list unless it has its own, and the default
// rules before the agent's own (so shared denies hold everywhere).
func merge(a, def *Agent) {
	a.Image = or(a.Image, def.Image)
	a.User = or(a.User, def.User)
	a.Default = or(a.Default, def.Default)
	a.AskTimeout = or(a.AskTimeout, def.AskTimeout)
	l, dl := &a.Limits, &def.Limits
	l.Memory = or(l.Memory, dl.Memory)
	l.CPUs = or(l.CPUs, dl.CPUs)
	l.Pids = or(l.Pids, dl.Pids)
	l.ExecTimeout = or(l.ExecTimeout, dl.ExecTimeout)
	l.MaxOutput = or(l.MaxOutput, dl.MaxOutput)
	l.MaxReadFile = or(l.MaxReadFile, dl.MaxReadFile)
	l.MaxWrite = or(l.MaxWrite, dl.MaxWrite)
	a.Core.Read = or(a.Core.Read, def.Core.Read)
	a.Core.Write = or(a.Core.Write, def.Core.Write)
	a.Core.Patch = or(a.Core.Patch, def.Core.Patch)
	a.Core.Exec = or(a.Core.Exec, def.Core.Exec)
	if a.Tools == nil {
		a.Tools = slices.Clone(def.Tools)
	}
	if a.Rates == nil {
		a.Rates = slices.Clone(def.Rates)
	}
	a.Session.Scope = or(a.Session.Scope, def.Session.Scope)
	if a.Session.Budget == nil && def.Session.Budget != nil {
		b := *def.Session.Budget
		a.Session.Budget = &b
	}
	a.Session.Labels = append(slices.Clone(def.Session.Labels), a.Session.Labels...)
	rules := make([]Rule, 0, len(def.Rules)+len(a.Rules))
	for i, r := range def.Rules {
		r.ID = fmt.Sprintf("defaults.rules[%d]", i)
		rules = append(rules, r)
	}
	for i, r := range a.Rules {
		r.ID = fmt.Sprintf("rules[%d]", i)
		rules = append(rules, r)
	}
	a.Rules = rules
}

func builtins(a *Agent, home, name string) {
	a.Image = or(a.Image, DefaultImage)
	a.Workspace = or(a.Workspace, filepath.Join(home, "agents", name, "workspace"))
	a.User = or(a.User, DefaultUser)
	a.Default = or(a.Default, "allow")
	a.AskTimeout = or(a.AskTimeout, DefaultAskTimeout)
	a.Session.Scope = or(a.Session.Scope, ScopeAgent)
	l := &a.Limits
	l.Memory = or(l.Memory, DefaultMemory)
	l.CPUs = or(l.CPUs, DefaultCPUs)
	l.Pids = or(l.Pids, DefaultPids)
	l.ExecTimeout = or(l.ExecTimeout, DefaultExecTimeout)
	l.MaxOutput = or(l.MaxOutput, DefaultMaxOutput)
	l.MaxReadFile = or(l.MaxReadFile, DefaultMaxReadFile)
	l.MaxWrite = or(l.MaxWrite, DefaultMaxWrite)
}

// positive refuses a zero or negative value written in the file; an unset
// field is left for the defaults.
func (d *decoder) positive(path string, v int64) {
	if d.set(path) && v <= 0 {
		d.errorf(d.at(path), path, "must be greater than 0")
	}
}

// hostPath resolves a host path from the file: "~/" is the user's home,
// relative paths are relative to the toolgate home.
func (d *decoder) hostPath(path, p, home string) string {
	if p == "" {
		return ""
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		u, err := os.UserHomeDir()
		if err != nil {
			d.errorf(d.at(path), path, "cannot expand ~: %v", err)
			return p
		}
		p = filepath.Join(u, rest)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(home, p)
	}
	return filepath.Clean(p)
}

// or returns v unless it is the zero value, then def.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
