package mcp

import (
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
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
		on := map[string]*bool{"read": a.Core.Read, "write": a.Core.Write, "patch": a.Core.Patch, "exec": a.Core.Exec}
		var names []string
		for _, t := range config.CoreTools {
			if b := on[t]; b == nil || *b {
				names = append(names, t)
			}
		}
		return append(names, a.Tools...)
	}
}

// visibleTools resolves visible names against the snapshot. A name also
// covers the tools SERVER.TOOL of an upstream server it names.
func visibleTools(snap *gateway.Snapshot, names []string) map[string]gateway.Tool {
	want := map[string]gateway.Tool{}
	for _, n := range names {
		if t, ok := snap.Tools[n]; ok {
			want[n] = t
		}
	}
	for name, t := range snap.Tools {
		if i := strings.LastIndexByte(name, '.'); i > 0 {
			if slices.Contains(names, name[:i]) {
				want[name] = t
			}
		}
	}
	return want
}
