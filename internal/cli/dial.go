package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/proto/api"
)

// callTool sends one call to the daemon and returns its buffered result
// (exec and run stream theirs: execStreamed).
func callTool(cmd *cobra.Command, g *Globals, agent, tool string, args any) (*api.Result, error) {
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
		return wordsErr(cmd, "no arguments", args)
	}
	return nil
}

// Words takes between min and max words (max < 0: no limit), named by
// what ("AGENT PATH"); outside that it says which words the command takes
// and which it got, where cobra's `accepts 2 arg(s), received 1` says
// neither.
func Words(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return wordsErr(cmd, what, args)
		}
		return nil
	}
}

func wordsErr(cmd *cobra.Command, what string, args []string) error {
	got := "none"
	if len(args) > 0 {
		got = fmt.Sprintf("%q", args)
	}
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	return UsageErr(cmd, fmt.Sprintf("%s takes %s, got %s", path, what, got))
}

// output returns a field of a tool's JSON result.
func output(res *api.Result, key string) any {
	m, _ := res.Output.(map[string]any)
	return m[key]
}
