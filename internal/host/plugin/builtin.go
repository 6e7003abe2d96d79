package plugin

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Kind builtin runs a Go Handler registered under a name:
//
//	plugins:
//	  toolgate-echo: {kind: builtin}                        # handler "toolgate-echo"
//	  say:           {kind: builtin, builtin: toolgate-echo} # same handler, another tool name
func init() { Register("builtin", newBuiltin) }

var (
	builtinMu sync.RWMutex
	builtins  = map[string]Handler{}
)

// RegisterBuiltin makes a Go handler available to kind builtin. It panics
// on a duplicate name: that is a programming error, found at startup.
func RegisterBuiltin(name string, h Handler) {
	builtinMu.Lock()
	defer builtinMu.Unlock()
	if _, dup := builtins[name]; dup {
		panic("plugin: builtin registered twice: " + name)
	}
	builtins[name] = h
}

func newBuiltin(name string, p config.Plugin, env Env) ([]gateway.Tool, error) {
	if p.Command != "" || len(p.Args) > 0 || len(p.Env) > 0 {
		return nil, errors.New("command, args and env do not apply to kind builtin")
	}
	handler := p.Builtin
	if handler == "" {
		handler = name
	}
	builtinMu.RLock()
	h := builtins[handler]
	known := slices.Sorted(maps.Keys(builtins))
	builtinMu.RUnlock()
	if h == nil {
		return nil, fmt.Errorf("builtin: no handler %q (known: %v)", handler, known)
	}
	t, err := newTool(name, p, env, h)
	if err != nil {
		return nil, err
	}
	return []gateway.Tool{t}, nil
}
