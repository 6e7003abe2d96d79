package mcp

import (
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// VisibleFromConfig is Options.Visible for a configuration: the agent's
// core tools that are switched on, and its plugin allowlist. cfg is asked
// each time, so a reload is seen.
func VisibleFromConfig(cfg func() *config.Config) func(agent string) []string {
	return func(agent string) []string {
		a := cfg().Agents[agent]
		if a == nil {
			return nil
		}
		var names []string
		for _, t := range config.CoreTools {
			if a.CoreEnabled(t) {
				names = append(names, t)
			}
		}
		return append(names, a.Tools...)
	}
}

// visibleTools resolves visible names against the snapshot by the same
// rule policy applies: a name also covers an upstream server's SERVER.TOOL.
func visibleTools(snap *gateway.Snapshot, names []string) map[string]gateway.Tool {
	want := map[string]gateway.Tool{}
	for name, t := range snap.Tools {
		if config.ListAllows(names, name) {
			want[name] = t
		}
	}
	return want
}
