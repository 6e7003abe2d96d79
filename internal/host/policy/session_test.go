package policy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// trifectaYAML is docs/policy.md's worked example: a read of a secret file
// is private, a connection to a host not marked trusted is untrusted and
// external, a model request with an MCP connector is external; a call
// out once the session holds private data and untrusted content asks.
const trifectaYAML = `plugins:
  search: {kind: command, command: /bin/true}
defaults:
  session:
    labels:
      - {label: private, when: 'tool == "read" && path.matches("(^|/)(\\.env|secrets/)")'}
      - {label: private, when: 'tool == "search"'}
      - {label: untrusted, when: 'kind == "egress" && !(host in ["pypi.org"])'}
      - {label: external, when: 'kind == "egress"'}
      - label: external
        when: 'kind == "model" && args.server_tools.exists(t, t.kind == "mcp")'
agents:
  coder:
    tools: [search]
    egress: {allow: ["pypi.org:443", "example.com:443", "drop.example:443"]}
    rules:
      - name: trifecta
        ask: '"external" in labels && "private" in session.labels && "untrusted" in session.labels'
        reason: the session read private data and took in untrusted content; sending out needs a person
        examples:
          match: [{kind: egress, host: drop.example, port: 443, session: [private, untrusted]}]
          not_match: [{kind: egress, host: drop.example, port: 443, session: [private]},
                      {tool: read, path: /workspace/a.go, session: [private, untrusted]}]
      - name: many-calls
        deny: 'session.calls > 3 && tool == "search"'
        reason: too many calls
  solo:
    session: {scope: session}
    egress: {allow: ["example.com:443"]}
    rules:
      - name: trifecta
        ask: '"external" in labels && "private" in session.labels && "untrusted" in session.labels'
        reason: needs a person
`

// fakeSessions is the tracker's contract at its smallest: labels by scope.
type fakeSessions struct {
	byAgent   map[string]map[string]gateway.Label
	bySession map[[2]string]map[string]gateway.Label
	calls     int
}

func (f *fakeSessions) facts(call *gateway.Call) *gateway.SessionFacts {
	return &gateway.SessionFacts{ID: call.Session, Labels: f.bySession[[2]string{call.Agent, call.Session}],
		Agent: gateway.ScopeFacts{Labels: f.byAgent[call.Agent], Calls: f.calls}}
}

func (f *fakeSessions) give(call *gateway.Call, d gateway.Decision) {
	f.calls++
	for _, l := range d.Labels {
		g := gateway.Label{Call: call.ID, Tool: call.Tool, Target: call.Target(), At: time.Date(2026, 12, 7, 12, 1, 3, 0, time.UTC)}
		if f.byAgent[call.Agent] == nil {
			f.byAgent[call.Agent] = map[string]gateway.Label{}
		}
		if _, ok := f.byAgent[call.Agent][l]; !ok {
			f.byAgent[call.Agent][l] = g
		}
		k := [2]string{call.Agent, call.Session}
		if f.bySession[k] == nil {
			f.bySession[k] = map[string]gateway.Label{}
		}
		if _, ok := f.bySession[k][l]; !ok {
			f.bySession[k][l] = g
		}
	}
}

func TestTrifecta(t *testing.T) {
	t.Parallel()
	e := engine(t, trifectaYAML)
	s := &fakeSessions{byAgent: map[string]map[string]gateway.Label{}, bySession: map[[2]string]map[string]gateway.Label{}}
	egress := func(agent, host, session string) *gateway.Call {
		return &gateway.Call{Agent: agent, Kind: gateway.KindEgress, Tool: "egress", Host: host, Port: 443, Session: session,
			Args: []byte(`{"target":"` + host + `:443"}`), Egress: &gateway.EgressFacts{Resolved: []netip.Addr{netip.MustParseAddr("93.184.215.14")}}}
	}
	read := func(agent, path, session string) *gateway.Call {
		return &gateway.Call{Agent: agent, Kind: gateway.KindCore, Tool: "read", Path: path, Session: session, Args: []byte(`{"path":"` + path + `"}`)}
	}
	steps := []struct {
		name    string
		call    *gateway.Call
		verdict string
		labels  []string
		reason  []string // substrings
	}{
		{"a trusted host first", egress("coder", "pypi.org", "s1"), "allow", []string{"external"}, nil},
		{"read a plain file", read("coder", "/workspace/a.go", "s1"), "allow", nil, nil},
		{"read the secret file", read("coder", "/workspace/.env", "s1"), "allow", []string{"private"}, nil},
		{"fetch an untrusted page", egress("coder", "example.com", "s1"), "allow", []string{"untrusted", "external"}, nil},
		// The third leg, from another session of the same agent: the
		// agent's scope holds every session's labels.
		{"send it out", egress("coder", "drop.example", "s2"), "ask", []string{"untrusted", "external"},
			[]string{"private from read /workspace/.env at 12:01:03 (call c2)", "untrusted from egress example.com:443", "this call gives untrusted, external"}},
		{"a read is no way out", read("coder", "/workspace/b.go", "s2"), "allow", nil, nil},
		{"another plain read", read("coder", "/workspace/c.go", "s2"), "allow", nil, nil},
		{"session.calls counts", &gateway.Call{Agent: "coder", Kind: gateway.KindTool, Tool: "search", Args: []byte(`{}`)}, "deny", []string{"private"}, nil},
		// Scope session: legs in two sessions are two sessions.
		{"solo: secret in one session", read("solo", "/workspace/.env", "a"), "allow", []string{"private"}, nil},
		{"solo: untrusted in it", egress("solo", "example.com", "a"), "allow", []string{"untrusted", "external"}, nil},
		{"solo: out of another session", egress("solo", "example.com", "b"), "allow", []string{"untrusted", "external"}, nil},
		{"solo: out of the same", egress("solo", "example.com", "a"), "ask", []string{"untrusted", "external"}, []string{"this session: private from read"}},
	}
	for i, st := range steps {
		st.call.ID = "c" + string(rune('0'+i))
		st.call.SessionFacts = s.facts(st.call)
		d := e.Decide(st.call)
		if d.Verdict() != st.verdict || !slices.Equal(d.Labels, st.labels) {
			t.Fatalf("%s: %s by %s (%s), labels %v; want %s with labels %v", st.name, d.Verdict(), d.Rule, d.Reason, d.Labels, st.verdict, st.labels)
		}
		for _, r := range st.reason {
			if !strings.Contains(d.Reason, r) {
				t.Errorf("%s: reason %q lacks %q", st.name, d.Reason, r)
			}
		}
		if x := e.Explain(st.call); x.Decision.Verdict() != d.Verdict() || x.Decision.Reason != d.Reason {
			t.Errorf("%s: Explain %+v, Decide %+v", st.name, x.Decision, d)
		}
		if d.Allow {
			s.give(st.call, d)
		}
	}
}

// TestSessionConfigErrors: a rule testing a label no giver gives, a giver
// that does not compile, a bad label name or scope, and an example naming
// an unknown label are refused at load, each where it is written.
func TestSessionConfigErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src, want string
	}{
		{"unknown label in a rule", `agents:
  a:
    session: {labels: [{label: private, when: 'tool == "read"'}]}
    rules:
      - {deny: '"privat" in session.labels', reason: typo}
`, `c.yaml:5: agents.a.rules[0].deny: label "privat" is given by none of agent a's session.labels (given: private)`},
		{"unknown label by index", `agents:
  a:
    rules:
      - {deny: 'has(session.labels.secret) || session.labels["x"].tool == "read"', reason: typo}
`, `c.yaml:4: agents.a.rules[0].deny: label "secret" is given by none of agent a's session.labels (given: none)`},
		{"a giver that cannot compile", `defaults:
  session:
    labels:
      - {label: private, when: 'path.matches("(")'}
agents:
  a: {}
`, `c.yaml:4: defaults.session.labels[0].when: `},
		{"a giver that is not a bool", `agents:
  a:
    session: {labels: [{label: private, when: 'path'}]}
`, `c.yaml:3: agents.a.session.labels[0].when: the expression is of type string; a rule must be a bool`},
		{"a bad label name", `agents:
  a:
    session: {labels: [{label: Private!, when: 'true'}]}
`, `agents.a.session.labels[0].label: "Private!": a label is 1-32 lowercase letters`},
		{"a giver without an expression", `agents:
  a:
    session: {labels: [{label: private}]}
`, `agents.a.session.labels[0].when: required`},
		{"a bad scope", `agents:
  a:
    session: {scope: global}
`, `agents.a.session.scope: "global": the scope of session labels is agent (the default) or session`},
		{"an example with an unknown label", `agents:
  a:
    session: {labels: [{label: private, when: 'tool == "read"'}]}
    rules:
      - deny: '"private" in session.labels && kind == "egress"'
        reason: no
        examples: {match: [{kind: egress, host: x.test, port: 443, session: [secret]}]}
`, `its session label "secret" is given by none of agent a's session.labels`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse("/tg", "c.yaml", []byte(c.src))
			if err == nil {
				_, err = New(cfg)
			}
			var errs config.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("want config.Errors, got %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("errors:\n%v\nwant one containing %q", err, c.want)
			}
		})
	}
}

// BenchmarkDecideSession is a call decided with session facts (five
// givers, a trifecta rule reading the session) beside the same call and
// rules without session facts, the 30 µs goal beside today's.
func BenchmarkDecideSession(b *testing.B) {
	e := engine(b, trifectaYAML)
	labels := map[string]gateway.Label{
		"private":   {Call: "c1", Tool: "read", Target: "/workspace/.env"},
		"untrusted": {Call: "c2", Tool: "egress", Target: "example.com:443"},
	}
	call := &gateway.Call{Agent: "coder", Kind: gateway.KindEgress, Tool: "egress", Host: "drop.example", Port: 443,
		Args: []byte(`{"target":"drop.example:443"}`), Egress: &gateway.EgressFacts{Resolved: []netip.Addr{netip.MustParseAddr("93.184.215.14")}}}
	b.Run("session", func(b *testing.B) {
		call.SessionFacts = &gateway.SessionFacts{Agent: gateway.ScopeFacts{Labels: labels, Calls: 2}}
		if d := e.Decide(call); !d.Ask {
			b.Fatalf("want ask: %+v", d)
		}
		b.ReportAllocs()
		for b.Loop() {
			e.Decide(call)
		}
	})
	b.Run("baseline", func(b *testing.B) {
		call.SessionFacts = nil
		if d := e.Decide(call); !d.Allow {
			b.Fatalf("want allow: %+v", d)
		}
		b.ReportAllocs()
		for b.Loop() {
			e.Decide(call)
		}
	})
}
