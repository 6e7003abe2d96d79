package policy

import (
	"sync"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/shellfacts"
)

// Variable slots of an activation, in the order of names.
const (
	vAgent = iota
	vTool
	vKind
	vArgs
	vPath
	vCommand
	vArgv
	vHost
	vPort
	vCommands
	vParseError
	vSession
	vLabels
	nVars
)

// activation exposes one call to CEL. Values are converted on first use and
// kept for the remaining rules, so a call whose rules never look at args
// never decodes its JSON. Activations are pooled: Decide allocates only the
// values the rules actually read.
type activation struct {
	call   *gateway.Call
	kind   gateway.Kind
	vals   [nVars]ref.Val
	facts  *shellfacts.Facts // read once, for commands and parse_error
	scope  string            // which of the session facts `session` is
	labels []string          // what the call gives, when allowed
}

var activations = sync.Pool{New: func() any { return new(activation) }}

func getActivation(call *gateway.Call, kind gateway.Kind) *activation {
	a := activations.Get().(*activation)
	a.call, a.kind = call, kind
	return a
}

func putActivation(a *activation) {
	*a = activation{}
	activations.Put(a)
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	i := slot(name)
	if i < 0 {
		return nil, false
	}
	if a.vals[i] == nil {
		a.vals[i] = a.value(i)
	}
	return a.vals[i], true
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

func slot(name string) int {
	switch name {
	case "agent":
		return vAgent
	case "tool":
		return vTool
	case "kind":
		return vKind
	case "args":
		return vArgs
	case "path":
		return vPath
	case "command":
		return vCommand
	case "argv":
		return vArgv
	case "host":
		return vHost
	case "port":
		return vPort
	case "commands":
		return vCommands
	case "parse_error":
		return vParseError
	case "session":
		return vSession
	case "labels":
		return vLabels
	}
	return -1
}

func (a *activation) value(i int) ref.Val {
	c := a.call
	switch i {
	case vAgent:
		return types.String(c.Agent)
	case vTool:
		return types.String(c.Tool)
	case vKind:
		return types.String(a.kind)
	case vArgs:
		// Arguments that are not a JSON object are an empty map: rules
		// reading a key then error, which fails closed for deny rules.
		m := c.ArgsMap()
		if m == nil {
			m = map[string]any{}
		}
		return types.NewStringInterfaceMap(types.DefaultTypeAdapter, m)
	case vPath:
		return types.String(c.Path)
	case vCommand:
		return types.String(c.Command)
	case vArgv:
		return types.NewStringList(types.DefaultTypeAdapter, c.Argv)
	case vHost:
		return types.String(c.Host)
	case vCommands:
		return types.DefaultTypeAdapter.NativeToValue(commandValues(a.shellFacts().Commands))
	case vParseError:
		return types.String(a.shellFacts().ParseError)
	case vSession:
		return a.sessionValue()
	case vLabels:
		return types.NewStringList(types.DefaultTypeAdapter, orEmpty(a.labels))
	}
	return types.Int(c.Port)
}

func (a *activation) shellFacts() *shellfacts.Facts {
	if a.facts == nil {
		f := Facts(a.call, a.kind)
		a.facts = &f
	}
	return a.facts
}

// Facts are the shell facts of a call: exec's command string (or argv),
// Claude Code's Bash command, a plugin tool's argv under the tool's name.
func Facts(call *gateway.Call, kind gateway.Kind) shellfacts.Facts {
	switch {
	case call.Command != "":
		return shellfacts.FromScript(call.Command)
	case len(call.Argv) == 0:
		return shellfacts.Facts{}
	case kind == gateway.KindTool:
		return shellfacts.FromArgv(append([]string{call.Tool}, call.Argv...))
	}
	return shellfacts.FromArgv(call.Argv)
}

// commandValues is how a rule sees commands: a list of maps with the
// fields documented in docs/policy.md.
func commandValues(cs []shellfacts.Command) []any {
	out := make([]any, len(cs))
	for i, c := range cs {
		var redirects []any = noRedirects
		if len(c.Redirects) > 0 {
			redirects = make([]any, len(c.Redirects))
		}
		for j, r := range c.Redirects {
			redirects[j] = map[string]any{"op": r.Op, "path": r.Path, "write": r.Write, "read": r.Read}
		}
		env := c.Env
		if env == nil {
			env = noEnv
		}
		out[i] = map[string]any{
			"name":      c.Name,
			"path":      c.Path,
			"args":      orEmpty(c.Args),
			"flags":     orEmpty(c.Flags),
			"env":       env,
			"redirects": redirects,
			"dynamic":   c.Dynamic,
			"via":       orEmpty(c.Via),
			"depth":     int64(c.Depth),
		}
	}
	return out
}

// Shared empties: CEL reads them, never writes.
var (
	noEnv       = map[string]string{}
	noStrings   = []string{}
	noRedirects = []any{}
)

func orEmpty(s []string) []string {
	if s == nil {
		return noStrings
	}
	return s
}
