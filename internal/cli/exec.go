package cli

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/proto/api"
)

func newExecCmd(g *Globals) *cobra.Command {
	var (
		cwd, timeout string
		env          envFlags
		stdin        bool
		shell        string
	)
	cmd := &cobra.Command{
		Use:   "exec AGENT [flags] -- ARGV... | exec AGENT -c 'SHELL COMMAND'",
		Short: "Run a command in an agent's sandbox through the gateway",
		Example: `  toolgate exec demo -- sh -c 'echo hi; exit 3'
  toolgate exec demo -c 'ls -la' --cwd notes`,
		Args: Words(1, -1, "AGENT -- ARGV..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			call := map[string]any{}
			if shell != "" {
				call["command"] = shell
			} else {
				if len(args) < 2 {
					return UsageErr(cmd, "give a command after -- or with -c")
				}
				call["argv"] = args[1:]
			}
			if cwd != "" {
				call["cwd"] = cwd
			}
			if timeout != "" {
				call["timeout"] = timeout
			}
			if err := env.apply(cmd, call); err != nil {
				return err
			}
			c, err := g.Dial()
			if err != nil {
				return err
			}
			res, err := execStreamed(cmd.Context(), c, args[0], call, stdin)
			if err != nil {
				return err
			}
			switch {
			case res.ExitCode == nil && res.Error != "":
				// Nothing ran to say why (with an exit code, a timeout's
				// own stderr has said it).
				return errors.New(res.Error)
			case res.ExitCode != nil && *res.ExitCode != 0:
				return ExitCode(*res.ExitCode)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&shell, "command", "c", "", "a shell command line, run with /bin/sh -c")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (relative to the workspace)")
	cmd.Flags().StringVar(&timeout, "timeout", "", "kill the process tree after this long (e.g. 30s)")
	env.register(cmd)
	cmd.Flags().BoolVarP(&stdin, "interactive", "i", false, stdinFlagUsage)
	return cmd
}

// stdinFlagUsage is -i's, for exec and run.
const stdinFlagUsage = "send this command's stdin to the process, byte for byte, as it is read"

// execStreamed runs an exec with its output streamed to this process's;
// with stdin, the command's standard input is this process's, sent as it
// is read and byte for byte — not as the JSON "stdin" string, which holds
// text only and the whole of it at once.
func execStreamed(ctx context.Context, c *adminclient.Client, agent string, call map[string]any, stdin bool) (*api.Result, error) {
	if stdin {
		return c.CallStream(ctx, agent, "exec", call, os.Stdin, os.Stdout, os.Stderr)
	}
	return c.Call(ctx, agent, "exec", call, os.Stdout, os.Stderr)
}
