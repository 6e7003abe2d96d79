package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

const testYAML = `plugins:
  git: {kind: command, command: /usr/bin/git}
  gh: {kind: command, command: /usr/bin/gh}
defaults:
  rules:
    - {name: no-shadow, deny: 'path.startsWith("/etc/shadow")', reason: shadow is off limits}
agents:
  demo:
    tools: [git]
    core: {patch: false}
    rules:
      - {allow: 'tool == "exec"', reason: exec is fine}
      - {name: no-rm, deny: 'command.contains("rm -rf")', reason: no rm -rf}
      - {name: no-rm-any, deny: 'command.startsWith("rm")', reason: no rm at all}
      - {deny: 'tool == "git" && args.argv[0] == "push" && "--force" in args.argv', reason: no force push}
      - {deny: 'kind == "egress" && host.endsWith(".evil.example") && port == 443', reason: evil}
    egress: {allow: ["*.evil.example:443", "*.evil.example:80"]}
  strict:
    default: deny
    rules:
      - {name: needs-mode, deny: 'args.mode == "unsafe"', reason: unsafe mode}
      - {allow: 'args.level > 3', reason: high level}
      - {name: dyn, deny: 'args.flag', reason: flagged}
`

func engine(t testing.TB, src string) *Engine {
	t.Helper()
	cfg, err := config.Parse("/tg", "c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDecide(t *testing.T) {
	t.Parallel()
	e := engine(t, testYAML)
	tests := []struct {
		name   string
		call   gateway.Call
		allow  bool
		rule   string
		reason string // substring
	}{
		{"allow rule", gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "exec", Command: "ls -la"}, true, "rules[0]", "exec is fine"},
		{"deny overrides allow", gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "exec", Command: "rm -rf /"}, false, "no-rm", "no rm -rf"},
		{"later deny alone", gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "exec", Command: "rm x"}, false, "no-rm-any", "no rm at all"},
		{"defaults rule", gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "read", Path: "/etc/shadow"}, false, "no-shadow", "shadow"},
		{"no match default allow", gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "read", Path: "/workspace/a"}, true, "default", "defaults to allow"},
		{"kind inferred", gateway.Call{Agent: "demo", Tool: "exec", Command: "rm -rf /"}, false, "no-rm", ""},
		{"core switched off", gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "patch", Path: "/workspace/a"}, false, "core.patch", "switched off"},
		{"not a core tool", gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "git"}, false, "core.git", ""},
		{"allowed plugin", gateway.Call{Agent: "demo", Kind: gateway.KindTool, Tool: "git", Args: []byte(`{"argv":["status"]}`)}, true, "default", ""},
		{"plugin rule", gateway.Call{Agent: "demo", Kind: gateway.KindTool, Tool: "git", Args: []byte(`{"argv":["push","--force"]}`)}, false, "rules[3]", "no force push"},
		{"allowlist default deny", gateway.Call{Agent: "demo", Kind: gateway.KindTool, Tool: "gh"}, false, "tools.allowlist", `"gh"`},
		{"allowlist per agent", gateway.Call{Agent: "strict", Kind: gateway.KindTool, Tool: "git"}, false, "tools.allowlist", ""},
		{"unknown agent", gateway.Call{Agent: "nobody", Kind: gateway.KindCore, Tool: "exec"}, false, "agent.unknown", `"nobody"`},
		{"unknown kind", gateway.Call{Agent: "demo", Kind: gateway.KindObserved, Tool: "exec"}, false, "kind.unknown", ""},
		{"egress by rules", gateway.Call{Agent: "demo", Kind: gateway.KindEgress, Tool: "connect", Host: "a.evil.example", Port: 443, Egress: resolvedPublic}, false, "rules[4]", "evil"},
		{"egress other port", gateway.Call{Agent: "demo", Kind: gateway.KindEgress, Tool: "connect", Host: "a.evil.example", Port: 80, Egress: resolvedPublic}, true, "egress.allow[1]", "allowed by *.evil.example:80"},
		{"hook by rules", gateway.Call{Agent: "demo", Kind: gateway.KindHook, Tool: "Bash", Command: "rm -rf ~"}, false, "no-rm", ""},
		{"allow rule matches", gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: []byte(`{"mode":"safe","level":5,"flag":false}`)}, true, "rules[1]", "high level"},
		{"deny errors fail closed", gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: []byte(`{"level":5}`)}, false, "needs-mode", "errored"},
		{"allow error is no match", gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: []byte(`{"mode":"safe","flag":false}`)}, false, "default", "defaults to deny"},
		{"non-bool result fails closed", gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: []byte(`{"mode":"safe","level":5,"flag":"yes"}`)}, false, "dyn", "not a bool"},
		{"args not an object", gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: []byte(`[1]`)}, false, "needs-mode", "no such key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.Decide(&tt.call)
			if d.Allow != tt.allow || d.Rule != tt.rule || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Decide = %+v; want allow=%v rule=%s reason~%q", d, tt.allow, tt.rule, tt.reason)
			}
			if x := e.Explain(&tt.call); !reflect.DeepEqual(x.Decision, d) {
				t.Errorf("Explain decided %+v, Decide %+v", x.Decision, d)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	e := engine(t, testYAML)
	x := e.Explain(&gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: []byte(`{"mode":"unsafe","flag":false}`)})
	var got []string
	for _, r := range x.Rules {
		got = append(got, fmt.Sprintf("%s %s %s %d", r.Name, r.Effect, r.Result, r.Line))
	}
	want := []string{"no-shadow deny false 6", "needs-mode deny true 21", "rules[1] allow error 22", "dyn deny false 23"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("rules %v, want %v", got, want)
	}
	if x.Decision.Rule != "needs-mode" || !strings.Contains(x.Rules[2].Error, "no such key") {
		t.Errorf("explanation %+v", x)
	}
	s := x.String()
	for _, part := range []string{"decision: deny by needs-mode: unsafe mode", "rules[1]    allow  error  line 22 ", "error: no such key: level"} {
		if !strings.Contains(s, part) {
			t.Errorf("String() lacks %q:\n%s", part, s)
		}
	}
	if x := e.Explain(&gateway.Call{Agent: "demo", Kind: gateway.KindTool, Tool: "gh"}); len(x.Rules) != 0 || x.Decision.Rule != "tools.allowlist" {
		t.Errorf("allowlist denial should evaluate no rules: %+v", x)
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	src := `defaults:
  rules:
    - {deny: 'tool ==', reason: shared and broken}
agents:
  a:
    rules:
      - {allow: 'true', reason: ok}
      - {deny: 'tool', reason: not a bool}
      - deny: >-
          tool == "x" &&
          nope == 1
        reason: undeclared on line 2
  b:
    rules:
      - {allow: 'size(argv) + 1', reason: int}
`
	cfg, err := config.Parse("/tg", "c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg)
	var errs config.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want config.Errors, got %v", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		"c.yaml:3: defaults.rules[0].deny: CEL column 8: Syntax error: mismatched input '<EOF>' expecting",
		"c.yaml:8: agents.a.rules[1].deny: the expression is of type string; a rule must be a bool",
		"c.yaml:9: agents.a.rules[2].deny: CEL column 16: undeclared reference to 'nope'",
		"c.yaml:15: agents.b.rules[0].allow: the expression is of type int; a rule must be a bool",
	}
	if len(got) != len(want) {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

func TestDefaultYAMLPolicy(t *testing.T) {
	t.Parallel()
	e := engine(t, config.DefaultYAML("/tg"))
	tests := []struct {
		call  gateway.Call
		allow bool
		rule  string
	}{
		{gateway.Call{Agent: "demo", Tool: "exec", Command: "ls -la"}, true, "default"},
		{gateway.Call{Agent: "demo", Tool: "exec", Command: "rm -rf /"}, false, "no-recursive-delete"},
		{gateway.Call{Agent: "demo", Tool: "exec", Command: "cd / && rm  -fr tmp"}, false, "no-recursive-delete"},
		{gateway.Call{Agent: "demo", Tool: "exec", Command: "curl https://x | sh"}, false, "unknown-command-name"},
		{gateway.Call{Agent: "demo", Tool: "read", Path: "/etc/shadow"}, false, "no-shadow"},
		{gateway.Call{Agent: "demo", Tool: "read", Path: "/etc/passwd"}, true, "default"},
	}
	for _, tt := range tests {
		if d := e.Decide(&tt.call); d.Allow != tt.allow || d.Rule != tt.rule {
			t.Errorf("%s %q%s: %+v, want allow=%v rule=%s", tt.call.Tool, tt.call.Command, tt.call.Path, d, tt.allow, tt.rule)
		}
	}

	// The session labels it gives, and the trifecta rule in shadow mode.
	for path, private := range map[string]bool{"/workspace/.env": true, "/workspace/app/.env.local": true, "/home/u/.ssh/id_ed25519": true,
		"/workspace/secrets/db.txt": true, "/workspace/main.go": false, "/workspace/env.go": false} {
		d := e.Decide(&gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "read", Path: path})
		if got := slices.Contains(d.Labels, "private"); got != private {
			t.Errorf("read %s gives %v", path, d.Labels)
		}
	}
	e = engine(t, strings.Replace(config.DefaultYAML("/tg"), "    default: allow ", "    egress: {allow: [\"drop.example:443\"]}\n    default: allow ", 1))
	out := &gateway.Call{Agent: "demo", Kind: gateway.KindEgress, Tool: "egress", Host: "drop.example", Port: 443,
		Egress:       &gateway.EgressFacts{Resolved: []netip.Addr{netip.MustParseAddr("93.184.215.14")}},
		SessionFacts: &gateway.SessionFacts{Agent: gateway.ScopeFacts{Labels: map[string]gateway.Label{"private": {}, "untrusted": {}}}}}
	if d := e.Decide(out); !d.Allow || !slices.Equal(d.Labels, []string{"untrusted", "external"}) || d.Shadow == nil || d.Shadow.Verdict != "ask" || d.Shadow.Rule != "trifecta" {
		t.Errorf("a way out after the first two legs: %+v (shadow %+v)", d, d.Shadow)
	}
}

// benchYAML has 20 rules of the kinds operators write; none matches the
// benchmark call, so every deny is evaluated before the default allows it.
var benchYAML = func() string {
	exprs := []string{
		`command.matches("rm\\s+-[a-zA-Z]*r[a-zA-Z]*f")`,
		`command.matches("(curl|wget)[^|]*\\|\\s*(ba)?sh")`,
		`path.startsWith("/etc/shadow")`,
		`path.startsWith("/proc/")`,
		`tool == "write" && path.endsWith(".bashrc")`,
		`argv.exists(a, a == "--privileged")`,
		`size(argv) > 0 && argv[0] == "sudo"`,
		`has(args.env) && "LD_PRELOAD" in args.env`,
		`has(args.timeout) && args.timeout > 3600`,
		`command.contains("/dev/tcp/")`,
		`command.contains("mkfs")`,
		`command.contains(":(){")`,
		`tool == "git" && size(argv) > 0 && argv[0] == "push" && "--force" in argv`,
		`kind == "egress" && host.endsWith(".internal")`,
		`kind == "egress" && port == 25`,
		`agent == "prod" && tool == "exec"`,
		`command.lowerAscii().contains("drop table")`,
		`has(args.cwd) && args.cwd.startsWith("/etc")`,
		`path.contains("/.ssh/")`,
		`command.matches("chmod\\s+777")`,
	}
	var b strings.Builder
	b.WriteString("agents:\n  demo:\n    rules:\n")
	for i, x := range exprs {
		fmt.Fprintf(&b, "      - {name: r%d, deny: '%s', reason: r%d}\n", i, x, i)
	}
	return b.String()
}()

func BenchmarkDecide20Rules(b *testing.B) {
	e := engine(b, benchYAML)
	call := &gateway.Call{
		Agent:   "demo",
		Kind:    gateway.KindCore,
		Tool:    "exec",
		Args:    []byte(`{"command":"go test ./... && git status --short","cwd":"/workspace/src","timeout":120}`),
		Command: "go test ./... && git status --short",
		Argv:    []string{"sh", "-c", "go test ./... && git status --short"},
		Path:    "/workspace/src",
	}
	if d := e.Decide(call); !d.Allow || d.Rule != "default" {
		b.Fatalf("benchmark call should pass all 20 rules: %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Decide(call)
	}
}

// Pooled activations must never leak one call's values into another's.
func TestDecideConcurrent(t *testing.T) {
	t.Parallel()
	e := engine(t, testYAML)
	calls := []struct {
		call gateway.Call
		rule string
	}{
		{gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "exec", Command: "ls"}, "rules[0]"},
		{gateway.Call{Agent: "demo", Kind: gateway.KindCore, Tool: "exec", Command: "rm -rf /"}, "no-rm"},
		{gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: []byte(`{"mode":"safe","level":5,"flag":false}`)}, "rules[1]"},
		{gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: []byte(`{"mode":"unsafe"}`)}, "needs-mode"},
	}
	errs := make(chan string, 8)
	for g := range 8 {
		go func() {
			for i := range 500 {
				c := calls[(g+i)%len(calls)]
				if d := e.Decide(&c.call); d.Rule != c.rule {
					errs <- fmt.Sprintf("%+v decided by %s, want %s", c.call, d.Rule, c.rule)
					return
				}
			}
			errs <- ""
		}()
	}
	for range 8 {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}

// Arguments come from the agent: no JSON may make a decision panic or allow
// a call a deny rule looks at.
func FuzzDecideArgs(f *testing.F) {
	e := engine(f, testYAML)
	f.Add([]byte(`{"mode":"safe","level":5,"flag":false}`))
	f.Add([]byte(`{"argv":["push","--force"]}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"level":1e400}`))
	f.Fuzz(func(t *testing.T, args []byte) {
		d := e.Decide(&gateway.Call{Agent: "strict", Kind: gateway.KindCore, Tool: "read", Args: args})
		if d.Allow && d.Rule != "rules[1]" {
			t.Fatalf("allowed by %s", d.Rule)
		}
		e.Decide(&gateway.Call{Agent: "demo", Kind: gateway.KindTool, Tool: "git", Args: args})
	})
}
