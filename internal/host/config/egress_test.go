package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// noProxyEnv runs a test as if the gateway's environment had env and no
// other variables.
func noProxyEnv(t *testing.T, env map[string]string) {
	t.Helper()
	old := lookupEnv
	lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	t.Cleanup(func() { lookupEnv = old })
}

func parseErrors(t *testing.T, src string) []string {
	t.Helper()
	cfg, err := Parse(home, "c.yaml", []byte(src))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want Errors, got cfg=%v err=%v", cfg, err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	return got
}

func TestEgressErrors(t *testing.T) {
	noProxyEnv(t, nil)
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "bad patterns",
			yaml: `agents:
  demo:
    egress:
      allow:
        - "*:443"
        - "*.com:443"
        - "*.10.0.0.1:443"
        - "*.[::1]:443"
        - "pypi.org"
        - "api.github.com:443"
        - "user@host:443"
        - "*.pythonhosted.org:0"
`,
			want: []string{
				`c.yaml:5: agents.demo.egress.allow[0]: egress rule "*:443": bare * would allow every host`,
				`c.yaml:6: agents.demo.egress.allow[1]: egress rule "*.com:443": wildcard over the single-label suffix "com"`,
				`c.yaml:7: agents.demo.egress.allow[2]: egress rule "*.10.0.0.1:443": wildcard over an IP address`,
				`c.yaml:8: agents.demo.egress.allow[3]: egress rule "*.[::1]:443": IPv6 address must be in brackets`,
				`c.yaml:9: agents.demo.egress.allow[4]: egress rule "pypi.org": missing port`,
				`c.yaml:11: agents.demo.egress.allow[6]: egress rule "user@host:443": userinfo is not allowed`,
				`c.yaml:12: agents.demo.egress.allow[7]: egress rule "*.pythonhosted.org:0": invalid port "0"`,
			},
		},
		{
			name: "ranges and switches",
			yaml: "defaults:\n  egress: {allow: ['*:80']}\nagents:\n  demo:\n    egress: {private: maybe, maxConnections: 0, idleTimeout: -1s, maxBytes: 0}\n",
			want: []string{
				`c.yaml:2: defaults.egress.allow[0]: egress rule "*:80": bare * would allow every host`,
				`c.yaml:5: agents.demo.egress.private: "maybe" is neither allow nor deny`,
				`c.yaml:5: agents.demo.egress.maxConnections: must be greater than 0`,
				`c.yaml:5: agents.demo.egress.idleTimeout: must be greater than 0`,
				`c.yaml:5: agents.demo.egress.maxBytes: must be greater than 0`,
			},
		},
		{
			name: "resolver by name",
			yaml: "gateway:\n  egress:\n    resolver: dns.local:53\n",
			want: []string{`c.yaml:3: gateway.egress.resolver: "dns.local:53" is not ip:port (e.g. 127.0.0.1:53); a resolver named by host would itself need resolving`},
		},
		{
			name: "NAT64 prefixes",
			yaml: "gateway:\n  egress:\n    nat64:\n      - 2001:db8:64::/96\n      - 2001:db8::/33\n      - 10.0.0.0/8\n      - nope\n",
			want: []string{
				`c.yaml:5: gateway.egress.nat64[1]: "2001:db8::/33": a NAT64 prefix is /32, /40, /48, /56, /64 or /96 (RFC 6052)`,
				`c.yaml:6: gateway.egress.nat64[2]: "10.0.0.0/8" is not an IPv6 prefix`,
				`c.yaml:7: gateway.egress.nat64[3]: "nope" is not a prefix (e.g. 2001:db8:64::/96)`,
			},
		},
		{
			name: "unknown field",
			yaml: "agents:\n  demo:\n    egress: {allowed: []}\n",
			want: []string{`c.yaml:3: agents.demo.egress.allowed: unknown field (known: allow, private, maxConnections, idleTimeout, maxBytes)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseErrors(t, tt.yaml); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestEgressUpstreamProxyIsAnError(t *testing.T) {
	src := "gateway:\n  egress: {}\nagents:\n  demo:\n    egress: {allow: ['pypi.org:443']}\n  other: {}\n"
	noProxyEnv(t, map[string]string{"https_proxy": "http://corp:3128", "NO_PROXY": "x"})
	got := parseErrors(t, src)
	want := `c.yaml:2: gateway.egress: the gateway's environment sets a proxy (https_proxy=http://corp:3128) but agents demo have egress`
	if len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], "bypass") {
		t.Fatalf("errors %q, want one starting %q", got, want)
	}

	// The same environment without egress anywhere is no concern of the guard's.
	if _, err := Parse(home, "c.yaml", []byte("agents:\n  demo: {}\n")); err != nil {
		t.Fatalf("no egress: %v", err)
	}
	noProxyEnv(t, map[string]string{"HTTP_PROXY": ""})
	if _, err := Parse(home, "c.yaml", []byte(src)); err != nil {
		t.Fatalf("empty proxy variable: %v", err)
	}
}

func TestEgressDefaultsMerge(t *testing.T) {
	noProxyEnv(t, nil)
	src := `gateway:
  egress: {resolver: "127.0.0.1:5353"}
defaults:
  egress:
    allow: ["pypi.org:443"]
    maxConnections: 8
agents:
  inherits: {}
  own:
    egress:
      allow: ["*.pythonhosted.org:443", "10.1.2.3:5432"]
      private: allow
      maxBytes: 2m
  none: {}
`
	cfg, err := Parse(home, "c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	in, own := cfg.Agents["inherits"].Egress, cfg.Agents["own"].Egress
	checks := []struct {
		name      string
		got, want any
	}{
		{"inherits allow", strings.Join(in.Allow, ","), "pypi.org:443"},
		{"inherits private", in.Private, "deny"},
		{"inherits conns", in.MaxConnections, 8},
		{"inherits idle", in.IdleTimeout, 60 * time.Second},
		{"inherits bytes", in.MaxBytes, int64(1 << 30)},
		{"own allow", strings.Join(own.Allow, ","), "*.pythonhosted.org:443,10.1.2.3:5432"},
		{"own private", own.Private, "allow"},
		{"own conns", own.MaxConnections, 8},
		{"own bytes", own.MaxBytes, int64(2 << 20)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
