package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/gateway"
)

// callTool sends one call to the daemon. With stream set, output is copied
// to the terminal as it is produced.
func callTool(cmd *cobra.Command, g *Globals, agent, tool string, args any, stream bool) (*gateway.Result, error) {
	c, err := g.Dial()
	if err != nil {
		return nil, err
	}
	if stream {
		return c.Call(cmd.Context(), agent, tool, args, os.Stdout, os.Stderr)
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
