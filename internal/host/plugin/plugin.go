// Package plugin builds the host-side handlers of plugin tools from the
// config. Each kind lives in its own file and registers a Factory from
// init(); Build never switches on kinds, so adding a kind is adding a file.
//
// Every kind shares one call shape, the one the in-sandbox launcher sends:
//
//	{"argv": ["status", "--short"], "cwd": "/workspace/sub"}
//
// argv is the tool's arguments (without the tool's name), cwd the caller's
// working directory as the sandbox sees it (default: the workspace root).
package plugin

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/secrets"
)

// Env is what factories may use to build their tools.
type Env struct {
	// Secrets resolves {{secret:NAME}} for handlers; nil holds none.
	Secrets *secrets.Store
	// Shared holds, by kind, what a kind keeps across builds (the upstream
	// MCP servers' connections): created, reused and closed by the daemon,
	// never by the kind's package.
	Shared map[string]any
}

// Factory builds the tools of one configured plugin of its kind. It checks
// the plugin's settings and must not start anything: Build is also how a
// config is checked.
type Factory func(name string, p config.Plugin, env Env) ([]gateway.Tool, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes kind available to Build. It panics on a duplicate kind:
// that is a programming error, found at startup.
func Register(kind string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[kind]; dup {
		panic("plugin: kind registered twice: " + kind)
	}
	factories[kind] = f
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	mu.RLock()
	defer mu.RUnlock()
	kinds := make([]string, 0, len(factories))
	for k := range factories {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// Build builds the tools of every configured plugin, keyed by tool name.
// All problems are reported at once, each naming its plugin.
func Build(cfg *config.Config, env Env) (map[string]gateway.Tool, error) {
	tools := map[string]gateway.Tool{}
	owner := map[string]string{}
	var errs []error
	names := make([]string, 0, len(cfg.Plugins))
	for name := range cfg.Plugins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := cfg.Plugins[name]
		mu.RLock()
		f := factories[p.Kind]
		mu.RUnlock()
		if f == nil {
			errs = append(errs, fmt.Errorf("plugins.%s: unknown kind %q (known: %v)", name, p.Kind, Kinds()))
			continue
		}
		built, err := f(name, p, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugins.%s: %w", name, err))
			continue
		}
		for _, t := range built {
			switch prev, dup := owner[t.Name()]; {
			case slices.Contains(config.CoreTools, t.Name()):
				errs = append(errs, fmt.Errorf("plugins.%s: tool %q is a core tool", name, t.Name()))
			case dup:
				errs = append(errs, fmt.Errorf("plugins.%s: tool %q is also provided by plugin %s", name, t.Name(), prev))
			default:
				owner[t.Name()] = name
				tools[t.Name()] = t
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tools, nil
}
