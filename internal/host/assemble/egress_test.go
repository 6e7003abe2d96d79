package assemble

import (
	"net/netip"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// parseEgress loads src with no proxy in the gateway's environment (which
// would refuse egress sections).
func parseEgress(t *testing.T, src string) *config.Config {
	t.Helper()
	for _, v := range config.ProxyVars {
		t.Setenv(v, "")
	}
	cfg, err := config.Parse(t.TempDir(), "c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Every agent's merged egress section reaches the guard: allowlist, private
// switch and limits, and the gateway's resolver.
func TestEgressFromConfig(t *testing.T) {
	cfg := parseEgress(t, `gateway:
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
`)
	// Defaults apply to every agent: "none" inherits egress too.
	agents := egressAgents(cfg)
	if len(agents) != 3 {
		t.Fatalf("egressAgents: %v", agents)
	}
	p := agents["own"].Policy
	if len(p.Allow) != 2 || !p.Allow[0].Wildcard || p.Allow[1].Host != "10.1.2.3" || !p.AllowPrivate {
		t.Errorf("own policy: %+v", p)
	}
	if l := agents["own"].Limits; l.MaxBytes != 2<<20 || l.IdleTimeout != 60*time.Second {
		t.Errorf("own limits: %+v", l)
	}
	if egressOptions(cfg).Resolver == nil {
		t.Error("configured resolver not in the guard's options")
	}

	// Without defaults, an agent without a section has no egress.
	cfg = parseEgress(t, "agents:\n  a: {}\n  b: {egress: {}}\n")
	if agents := egressAgents(cfg); cfg.Agents["a"].Egress != nil || len(agents) != 1 || len(agents["b"].Policy.Allow) != 0 {
		t.Errorf("egress sections: a=%v agents=%v", cfg.Agents["a"].Egress, agents)
	}
	if egressOptions(cfg).Resolver != nil {
		t.Error("a resolver without configuration")
	}
}

// The configured NAT64 prefixes reach the guard: a metadata address behind
// one is classified as what it is.
func TestEgressOptionsNAT64(t *testing.T) {
	cfg := parseEgress(t, "gateway:\n  egress:\n    nat64: [\"2001:db8:64::/96\"]\n")
	c := netrule.Classifier{NAT64: egressOptions(cfg).NAT64}
	if got := c.Classify(netip.MustParseAddr("2001:db8:64::a9fe:a9fe")); got != netrule.Metadata {
		t.Fatalf("169.254.169.254 behind the operator prefix classified %v", got)
	}
}
