package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/gateway"
)

// callTool sends one call to the daemon and returns its buffered result
// (exec and run stream theirs: execStreamed).
func callTool(cmd *cobra.Command, g *Globals, agent, tool string, args any) (*gateway.Result, error) {
	c, err := g.Dial()
	if err != nil {
		return nil, err
	}
	return c.Call(cmd.Context(), agent, tool, args, nil, nil)
}

// UsageErr is a command-line mistake: msg and the command's usage line.
func UsageErr(cmd *cobra.Command, msg string) error {
	return fmt.Errorf("%s\nusage: %s", msg, cmd.UseLine())
}

// output returns a field of a tool's JSON result.
func output(res *gateway.Result, key string) any {
	m, _ := res.Output.(map[string]any)
	return m[key]
}
