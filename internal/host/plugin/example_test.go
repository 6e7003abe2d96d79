package plugin_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/plugin"
)

// A plugin kind is a Factory registered from an init function, in a file
// that internal/host/plugin/kinds imports. The factory reads the plugin's
// settings and returns its tools; it starts nothing, because Build is also
// how a config is checked. The gateway never switches on kinds: Build finds
// the factory by the kind named in the config.
func ExampleRegister() {
	// In a real kind: func init() { plugin.Register("fixed", newFixed) }
	plugin.Register("fixed", func(name string, p config.Plugin, env plugin.Env) ([]gateway.Tool, error) {
		if p.Command == "" {
			return nil, errors.New("command is required")
		}
		return []gateway.Tool{fixedTool{name: name}}, nil
	})

	tools, err := plugin.Build(&config.Config{Plugins: map[string]config.Plugin{
		"stamp": {Kind: "fixed", Command: "/usr/bin/date"},
	}}, plugin.Env{})
	fmt.Println(tools["stamp"].Name(), tools["stamp"].Kind(), err)

	_, err = plugin.Build(&config.Config{Plugins: map[string]config.Plugin{"bad": {Kind: "fixed"}}}, plugin.Env{})
	fmt.Println(err)
	// Output:
	// stamp tool <nil>
	// plugins.bad: command is required
}

// fixedTool stands for the tool a kind builds; see gateway.Tool.
type fixedTool struct{ name string }

func (t fixedTool) Name() string                                 { return t.name }
func (fixedTool) Kind() gateway.Kind                             { return gateway.KindTool }
func (fixedTool) Prepare(*gateway.Call, gateway.AgentInfo) error { return nil }
func (fixedTool) Run(context.Context, *gateway.Call, *gateway.RunEnv) (*gateway.Result, error) {
	return &gateway.Result{Output: "fixed"}, nil
}
