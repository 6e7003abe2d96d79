package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const home = "/home/op/.toolgate"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // each error's full text, in order
	}{
		{
			name: "unknown field",
			yaml: "agents:\n  demo:\n    limits:\n      memroy: 1g\n",
			want: []string{`c.yaml:4: agents.demo.limits.memroy: unknown field (known: memory, cpus, pids, execTimeout, maxOutput, maxReadFile, maxWrite)`},
		},
		{
			name: "bad type",
			yaml: "agents:\n  demo:\n    tools: git\n    core:\n      exec: yes\n",
			want: []string{
				`c.yaml:3: agents.demo.tools: expected a list, got "git"`,
				`c.yaml:5: agents.demo.core.exec: expected true or false, got "yes"`,
			},
		},
		{
			name: "bad size",
			yaml: "agents:\n  demo:\n    limits:\n      memory: 12q\n      maxOutput: lots\n",
			want: []string{
				`c.yaml:4: agents.demo.limits.memory: "12q" is not a size (e.g. 512m, 2g)`,
				`c.yaml:5: agents.demo.limits.maxOutput: "lots" is not a size (e.g. 512m, 2g)`,
			},
		},
		{
			name: "bad duration and number",
			yaml: "agents:\n  demo:\n    limits:\n      execTimeout: 10\n      cpus: many\n      pids: 1.5\n",
			want: []string{
				`c.yaml:4: agents.demo.limits.execTimeout: "10" is not a duration (e.g. 30s, 10m)`,
				`c.yaml:5: agents.demo.limits.cpus: "many" is not a number`,
				`c.yaml:6: agents.demo.limits.pids: "1.5" is not an integer`,
			},
		},
		{
			name: "undeclared tool",
			yaml: "plugins:\n  git: {kind: command, command: /usr/bin/git}\nagents:\n  demo:\n    tools: [git, gh, exec]\n",
			want: []string{
				`c.yaml:5: agents.demo.tools[1]: tool "gh" is not declared under plugins`,
				`c.yaml:5: agents.demo.tools[2]: "exec" is a core tool; switch it with core.exec, not tools`,
			},
		},
		{
			name: "rules need one effect and a reason",
			yaml: "agents:\n  demo:\n    rules:\n      - deny: 'true'\n      - allow: 'true'\n        deny: 'false'\n        reason: x\n      - reason: y\n",
			want: []string{
				`c.yaml:4: agents.demo.rules[0].reason: required: say why, it is shown to the agent and in the audit log`,
				`c.yaml:5: agents.demo.rules[1]: a rule has one of deny, allow or ask, not several; split it into rules`,
				`c.yaml:8: agents.demo.rules[2]: a rule needs one of deny, allow or ask (a CEL expression)`,
			},
		},
		{
			name: "names",
			yaml: "plugins:\n  exec: {kind: builtin}\n  Bad/Name: {kind: builtin}\nagents:\n  Demo: {}\n  ok: {default: maybe}\n",
			want: []string{
				`c.yaml:2: plugins.exec: exec is a core tool; a plugin cannot take its name`,
				`c.yaml:3: plugins["Bad/Name"]: plugin names are 1-63 lowercase letters, digits, _, . or -, starting with a letter or digit`,
				`c.yaml:5: agents.Demo: agent names are 1-63 lowercase letters, digits, _ or -, starting with a letter or digit`,
				`c.yaml:6: agents.ok.default: "maybe" is neither allow nor deny`,
			},
		},
		{
			name: "plugin named as another plugin's tool",
			yaml: "plugins:\n  git: {kind: builtin}\n  git.push: {kind: builtin}\n  gitx.push: {kind: builtin}\n",
			want: []string{
				`c.yaml:3: plugins["git.push"]: git.push reads as a tool of plugin git (SERVER.TOOL), so every agent listing git would get it; rename it`,
			},
		},
		{
			name: "duplicate key",
			yaml: "agents:\n  demo: {}\n  demo: {}\n",
			want: []string{`c.yaml:3: agents.demo: defined twice (first at line 2)`},
		},
		{
			name: "duplicate rule names across defaults",
			yaml: "defaults:\n  rules:\n    - {name: r, deny: 'true', reason: x}\nagents:\n  demo:\n    rules:\n      - {name: r, deny: 'true', reason: x}\n",
			want: []string{`c.yaml:7: agents.demo.rules: two rules are named "r"`},
		},
		{
			name: "ranges",
			yaml: "gateway:\n  listen: localhost\nagents:\n  demo:\n    limits: {memory: 1m, cpus: 0, pids: -1, execTimeout: -1s}\n",
			want: []string{
				`c.yaml:2: gateway.listen: "localhost" is not host:port (e.g. 127.0.0.1:7433)`,
				`c.yaml:5: agents.demo.limits.memory: "1m" is below Docker's minimum of 6m`,
				`c.yaml:5: agents.demo.limits.cpus: 0 is not between 0 and 1024`,
				`c.yaml:5: agents.demo.limits.pids: must be greater than 0`,
				`c.yaml:5: agents.demo.limits.execTimeout: must be greater than 0`,
			},
		},
		{
			name: "audit postgres",
			yaml: "gateway:\n  audit:\n    postgres: {}\n",
			want: []string{`c.yaml:3: gateway.audit.postgres.dsn: required: the fleet database, e.g. postgres://toolgate:{{secret:pg_password}}@db.internal:5432/toolgate`},
		},
		{
			// The DSN is never quoted back: it may hold a password.
			name: "audit postgres not a DSN",
			yaml: "gateway:\n  audit:\n    postgres: {dsn: 'mysql:hunter2@db'}\n",
			want: []string{`c.yaml:3: gateway.audit.postgres.dsn: not a connection string: a postgres:// URL or key=value pairs (host=… dbname=…)`},
		},
		{
			name: "otlp",
			yaml: "gateway:\n  telemetry:\n    otlp: {protocol: thrift}\n",
			want: []string{
				`c.yaml:3: gateway.telemetry.otlp.protocol: "thrift" is neither http nor grpc`,
				`c.yaml:3: gateway.telemetry.otlp.endpoint: required: the collector, e.g. otel-collector.internal:4318`,
			},
		},
		{
			name: "otlp endpoints",
			yaml: "gateway:\n  telemetry:\n    otlp: {endpoint: collector}\n",
			want: []string{`c.yaml:3: gateway.telemetry.otlp.endpoint: "collector" is neither host:port nor an http(s):// URL`},
		},
		{
			// The URL is never quoted back: it may hold a credential.
			name: "otlp credential in the URL",
			yaml: "gateway:\n  telemetry:\n    otlp: {endpoint: 'https://u:hunter2@c:4318'}\n",
			want: []string{`c.yaml:3: gateway.telemetry.otlp.endpoint: credentials do not belong in the URL; set OTEL_EXPORTER_OTLP_HEADERS in the daemon's environment`},
		},
		{
			name: "otlp scheme",
			yaml: "gateway:\n  telemetry:\n    otlp: {endpoint: 'ftp://hunter2@c:4318'}\n",
			want: []string{`c.yaml:3: gateway.telemetry.otlp.endpoint: not an http(s):// URL with a host`},
		},
		{
			name: "otlp insecure https",
			yaml: "gateway:\n  telemetry:\n    otlp: {endpoint: 'https://c:4318', insecure: true}\n",
			want: []string{`c.yaml:3: gateway.telemetry.otlp.insecure: the endpoint is https://; insecure (plain text) contradicts it`},
		},
		{
			name: "shared workspace",
			yaml: "agents:\n  a: {workspace: /srv/w}\n  b: {workspace: /srv/w/}\n",
			want: []string{`c.yaml:3: agents.b.workspace: /srv/w is also the workspace of agent a`},
		},
		{
			name: "syntax error",
			yaml: "agents:\n  demo: [\n",
			want: []string{`c.yaml:2: did not find expected node content`},
		},
		{
			name: "two documents",
			yaml: "agents: {}\n---\nagents: {}\n",
			want: []string{`c.yaml:2: only one YAML document is allowed`},
		},
		{
			name: "top level not a mapping",
			yaml: "- a\n",
			want: []string{`c.yaml:1: expected a mapping, got a list`},
		},
		{
			name: "merge keys",
			yaml: "defaults: &x {image: a}\nagents:\n  demo:\n    <<: *x\n",
			want: []string{`c.yaml:4: agents.demo: merge keys (<<) are not supported; shared settings go under defaults`},
		},
		{
			name: "notifiers",
			yaml: "gateway:\n  approvals:\n    notify:\n      - {kind: webhook, url: 'http://hooks.example.com/x'}\n" +
				"      - {kind: email, url: 'https://x.example'}\n      - {kind: slack, url: 'ftp://x'}\n" +
				"      - {name: Bad!, kind: webhook, url: 'https://hooks.slack.com/services/{{secret:hook}}'}\n" +
				"      - {kind: webhook, url: 'http://127.0.0.1:9/x', attempts: -1}\n",
			want: []string{
				`c.yaml:4: gateway.approvals.notify: notifiers send links to this gateway: set gateway.listen (or gateway.approvals.linkBase)`,
				`c.yaml:4: gateway.approvals.notify[0].url: http to hooks.example.com would send the asked call's facts in clear text off this host: use https`,
				`c.yaml:5: gateway.approvals.notify[1].kind: "email": a notifier is webhook or slack`,
				`c.yaml:6: gateway.approvals.notify[2].url: want https (or http to a loopback address), not ftp`,
				`c.yaml:7: gateway.approvals.notify[3].name: "Bad!": names are 1-63 lowercase letters, digits, _ or -`,
				`c.yaml:8: gateway.approvals.notify[4].attempts: must be greater than 0`,
			},
		},
		{
			name: "budgets",
			yaml: "agents:\n  demo:\n    session:\n      budget: {cost: -1}\n      scope: task\n",
			want: []string{
				`c.yaml:4: agents.demo.session.budget: a budget's caps must not be negative (0 or unset: no cap)`,
				`c.yaml:5: agents.demo.session.scope: "task": the scope of session labels is agent (the default) or session`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(home, "c.yaml", []byte(tt.yaml))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("want Errors, got cfg=%v err=%v", cfg, err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestRuleLinesAndIDs(t *testing.T) {
	src := `defaults:
  rules:
    - deny: 'tool == "x"'
      reason: shared
agents:
  demo:
    rules:
      - name: first
        allow: 'true'
        reason: a

      - deny: 'false'
        reason: b
`
	cfg, err := Parse(home, "c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	type rl struct {
		id   string
		line int
	}
	var got []rl
	for _, r := range cfg.Agents["demo"].Rules {
		got = append(got, rl{r.ID, r.Line})
	}
	want := []rl{{"defaults.rules[0]", 3}, {"first", 8}, {"rules[1]", 12}}
	if len(got) != len(want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rule %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestDefaultsMerge(t *testing.T) {
	src := `plugins:
  git: {kind: command, command: /usr/bin/git}
  echo: {kind: builtin, builtin: toolgate-echo}
defaults:
  image: custom:1
  tools: [echo]
  default: deny
  limits: {memory: 1g, pids: 64}
  core: {exec: false}
agents:
  plain:
  own:
    image: own:2
    workspace: work/own
    tools: [git]
    default: allow
    limits: {memory: 2g, maxWrite: 1024}
    core: {exec: true, read: false}
`
	cfg, err := Parse(home, "c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	plain, own := cfg.Agents["plain"], cfg.Agents["own"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"plain image", plain.Image, "custom:1"},
		{"plain workspace", plain.Workspace, home + "/agents/plain/workspace"},
		{"plain user", plain.User, DefaultUser},
		{"plain tools", strings.Join(plain.Tools, ","), "echo"},
		{"plain default", plain.Default, "deny"},
		{"plain memory", plain.MemoryBytes(), int64(1 << 30)},
		{"plain pids", plain.Limits.Pids, int64(64)},
		{"plain cpus", plain.Limits.CPUs, 1.0},
		{"plain timeout", plain.Limits.ExecTimeout, 10 * time.Minute},
		{"plain maxOutput", plain.Limits.MaxOutput, int64(1 << 20)},
		{"plain maxReadFile", plain.Limits.MaxReadFile, int64(10 << 20)},
		{"plain maxWrite", plain.Limits.MaxWrite, int64(64 << 20)},
		{"plain exec", plain.CoreEnabled("exec"), false},
		{"plain read", plain.CoreEnabled("read"), true},
		{"plain not core", plain.CoreEnabled("git"), false},
		{"own image", own.Image, "own:2"},
		{"own workspace", own.Workspace, home + "/work/own"},
		{"own tools", strings.Join(own.Tools, ","), "git"},
		{"own default", own.Default, "allow"},
		{"own memory", own.MemoryBytes(), int64(2 << 30)},
		{"own pids", own.Limits.Pids, int64(64)},
		{"own maxWrite", own.Limits.MaxWrite, int64(1024)},
		{"own exec", own.CoreEnabled("exec"), true},
		{"own read", own.CoreEnabled("read"), false},
		{"audit dir", cfg.Gateway.Audit.Dir, home + "/logs"},
		{"audit file", cfg.Gateway.Audit.MaxFileBytes, int64(64 << 20)},
		{"audit args", cfg.Gateway.Audit.MaxArgBytes, 1024},
		{"home", cfg.Home, home},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512m", 512 << 20, true},
		{"2g", 2 << 30, true},
		{"2G", 2 << 30, true},
		{"1.5GiB", 3 << 29, true},
		{"64 MB", 64 << 20, true},
		{"4096", 4096, true},
		{"10k", 10 << 10, true},
		{"", 0, false},
		{"m", 0, false},
		{"12q", 0, false},
		{"-1m", 0, false},
		{"1e3", 0, false},
		{"99999999999t", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestDefaultYAMLLoads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(DefaultYAML(dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	demo := cfg.Agents["demo"]
	if demo == nil || len(demo.Rules) < 3 {
		t.Fatalf("demo agent with its rules and the default rule expected, got %+v", demo)
	}
	if demo.Workspace != filepath.Join(dir, "agents", "demo", "workspace") || cfg.Gateway.Audit.Dir != filepath.Join(dir, "logs") {
		t.Errorf("paths not under home: %s %s", demo.Workspace, cfg.Gateway.Audit.Dir)
	}
}

func TestOTLP(t *testing.T) {
	for _, ep := range []string{"collector.internal:4318", "http://127.0.0.1:4318/otlp/v1/traces", "https://c.example:443"} {
		cfg, err := Parse(home, "c.yaml", []byte("gateway:\n  telemetry:\n    otlp: {endpoint: '"+ep+"'}\n"))
		if err != nil {
			t.Fatalf("%s: %v", ep, err)
		}
		if o := cfg.Gateway.Telemetry.OTLP; o == nil || o.Endpoint != ep || o.Protocol != OTLPHTTP {
			t.Errorf("%s: %+v", ep, o)
		}
	}
	cfg, err := Parse(home, "c.yaml", nil)
	if err != nil || cfg.Gateway.Telemetry.OTLP != nil {
		t.Fatalf("traces are off by default: %+v, %v", cfg.Gateway.Telemetry, err)
	}
}

func TestEmptyFile(t *testing.T) {
	cfg, err := Parse(home, "c.yaml", nil)
	if err != nil || len(cfg.Agents) != 0 || cfg.Gateway.Audit.Dir != home+"/logs" {
		t.Fatalf("empty file: %+v, %v", cfg, err)
	}
}

func TestAliasBomb(t *testing.T) {
	// 100 rules shared by alias into 600 agents: a small file that would
	// expand to 180,000 nodes.
	var b strings.Builder
	b.WriteString("defaults:\n  rules: &r [")
	b.WriteString(strings.Repeat("{deny: 'true', reason: r},", 100))
	b.WriteString("]\nagents:\n")
	for i := range 600 {
		fmt.Fprintf(&b, "  a%d: {rules: *r}\n", i)
	}
	_, err := Parse(home, "c.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "more than 100000 nodes") {
		t.Fatalf("want node budget error, got %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(DefaultYAML(home)))
	f.Add([]byte("agents:\n  demo:\n    limits: {memory: 12q}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("plugins: {git: {kind: command, command: git}}\nagents: {d: {tools: [git], rules: [{deny: x, reason: y}]}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(home, "c.yaml", data)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("exactly one of cfg and err must be set: %v %v", cfg, err)
		}
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error is not a non-empty Errors: %v", err)
			}
			return
		}
		for name, a := range cfg.Agents {
			if a.Image == "" || a.Workspace == "" || a.MemoryBytes() < minMemory || a.Limits.ExecTimeout <= 0 {
				t.Fatalf("agent %s missing defaults: %+v", name, a)
			}
		}
	})
}

func TestListAllows(t *testing.T) {
	list := []string{"git", "up", "srv.read"}
	for name, want := range map[string]bool{
		"git": true, "gh": false,
		"up.echo": true, "up.a.b": true, // every tool of a listed server, dotted names too
		"srv.read": true, "srv.write": false, // one tool of a server
		"gitx": false, "git.admin": true, // config refuses a plugin git.admin beside git
	} {
		if got := ListAllows(list, name); got != want {
			t.Errorf("ListAllows(%q) = %v, want %v", name, got, want)
		}
	}
}
