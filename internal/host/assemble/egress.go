package assemble

import (
	"context"
	"net"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/egress"
)

// EgressTool is the gateway's egress tool for cfg: every agent with an
// egress section, with its allowlist and limits, and the guard's resolver
// and NAT64 prefixes. The daemon builds it with each snapshot; tests that
// run the egress route alone build it the same way.
func EgressTool(cfg *config.Config) *egress.Tool {
	return egress.NewTool(egressAgents(cfg), egressOptions(cfg))
}

// egressAgents is the egress configuration of every agent that has one.
func egressAgents(cfg *config.Config) map[string]egress.AgentConfig {
	out := map[string]egress.AgentConfig{}
	for name, a := range cfg.Agents {
		if a.Egress == nil {
			continue
		}
		out[name] = egress.AgentConfig{
			Policy:         a.Egress.Policy(),
			MaxConnections: a.Egress.MaxConnections,
			Limits:         egress.Limits{IdleTimeout: a.Egress.IdleTimeout, MaxBytes: a.Egress.MaxBytes},
		}
	}
	return out
}

// egressOptions are the guard's options: the configured resolver and
// NAT64 prefixes, if any.
func egressOptions(cfg *config.Config) egress.Options {
	var o egress.Options
	if r := cfg.Gateway.Egress.Resolver; r != "" {
		o.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, r)
		}}
	}
	for _, p := range cfg.Gateway.Egress.NAT64 {
		if pfx, err := config.NAT64Prefix(p); err == nil { // validated at load
			o.NAT64 = append(o.NAT64, pfx)
		}
	}
	return o
}
