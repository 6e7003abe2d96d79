package cli

import (
	"fmt"
	"strings"

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

// NoArgs is cobra.NoArgs that says what is wrong: cobra's says `unknown
// command "demo" for "toolgate agents"`, as if the word were a misspelt
// subcommand, which it is only where there are subcommands.
func NoArgs(cmd *cobra.Command, args []string) error {
	if cmd.HasSubCommands() {
		return cobra.NoArgs(cmd, args)
	}
	if len(args) > 0 {
		path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		return UsageErr(cmd, fmt.Sprintf("%s takes no arguments, got %q", path, args))
	}
	return nil
}

// output returns a field of a tool's JSON result.
func output(res *gateway.Result, key string) any {
	m, _ := res.Output.(map[string]any)
	return m[key]
}
