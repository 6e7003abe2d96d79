package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

func newRunCmd(g *Globals) *cobra.Command {
	var (
		cwd, timeout string
		env          envFlags
		doorOnly     bool
		stdin        bool
		session      string
		budget       string
	)
	cmd := &cobra.Command{
		Use:   "run AGENT [flags] -- ARGV...",
		Short: "Run a program (e.g. claude) in an agent's sandbox, output streamed",
		Long: `Runs ARGV in the agent's sandbox through the gateway (an exec call, decided and
recorded like any other). Refuses to start claude with --bare or --safe-mode:
both skip the hooks that gate and record Claude Code's tools. When ARGV starts
claude without --settings, the gate and the tap are added as inline settings
(--settings '<json>'): on claude's command line, not in a file the agent could
edit. Give your own --settings (see toolgate hooks settings --merge) to opt out.
Inside a toolgate sandbox the gate is also in Claude Code's managed settings, which
the agent cannot switch off and which make Claude Code ignore every other hook.

With --door-only, claude's own actuators (Bash, Write, Edit, Read, …) are
disallowed and its MCP client is connected to toolgate's MCP door alone
(--mcp-config, --strict-mcp-config): the agent's gated tools (exec, read,
write, patch and its plugin tools) are then the only way it acts, each
decided and recorded as a call; the hook gate still guards what remains.`,
		Example: `  toolgate run demo --timeout 30m -- claude -p "fix the tests"
  toolgate run demo --door-only -- claude -p "fix the tests"
  toolgate run demo -i -- claude -p "summarize this" < notes.txt
  toolgate run demo --secret-env GH_TOKEN=github_token -- sh -c 'gh pr list'`,
		Args: Words(2, -1, "AGENT -- ARGV..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			argv := args[1:]
			if err := hooks.CheckLaunch(argv); err != nil {
				return err
			}
			if doorOnly {
				var err error
				if argv, err = hooks.DoorOnly(argv, proto.ClientPath); err != nil {
					return UsageErr(cmd, err.Error())
				}
			}
			argv, gated, err := hooks.WithGate(argv, hooks.GateCommand{Command: proto.ClientPath})
			if err != nil {
				return err
			}
			if !gated && hooks.ClaudeAt(argv) >= 0 {
				fmt.Fprintln(os.Stderr, "toolgate: claude runs with your --settings: make sure they register the gate (toolgate hooks settings --merge)")
			}
			call := map[string]any{"argv": argv}
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
			// One session for the run: the exec, and what its process tree
			// does (hooks, model calls, plugin calls, egress), link to it.
			if session == "" {
				session = api.NewID()
			} else if !proto.ValidCallID(session) {
				return UsageErr(cmd, fmt.Sprintf("--session %q: letters, digits, _ and -, at most 128", session))
			}
			if interactive(os.Stderr) { // a script's output stays the program's own
				fmt.Fprintf(os.Stderr, "toolgate: session %s (toolgate audit show --session %s)\n", session, session)
			}
			res, err := execStreamed(cmd.Context(), c.WithSession(session).WithBudget(budget), args[0], call, stdin)
			if err != nil {
				return err
			}
			if res.ExitCode != nil && *res.ExitCode != 0 {
				return ExitCode(*res.ExitCode)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (relative to the workspace)")
	cmd.Flags().StringVar(&timeout, "timeout", "", "kill the process tree after this long (e.g. 30m)")
	env.register(cmd)
	cmd.Flags().StringVar(&session, "session", "", "the run's session id (default: a new one, shown when stderr is a terminal)")
	cmd.Flags().StringVar(&budget, "budget", "", "caps for the run across every door, e.g. cost=2,tokens=500000,calls=500,wall=30m (default: the agent's session.budget)")
	cmd.Flags().BoolVarP(&stdin, "interactive", "i", false, stdinFlagUsage)
	cmd.Flags().BoolVar(&doorOnly, "door-only", false, "claude acts only through toolgate's tools (its own Bash, Write, Edit, Read … off; MCP door on)")
	return cmd
}

// interactive reports whether f is a terminal.
func interactive(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
