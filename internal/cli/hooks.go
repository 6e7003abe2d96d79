package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/hooks"
	"github.com/toolgate/toolgate/internal/sandbox"
)

func newHooksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "hooks", Short: "Claude Code hooks: the gate and tap settings"}
	var agent, merge string
	var timeout int
	settings := &cobra.Command{
		Use:   "settings --agent AGENT [--merge existing.json]",
		Short: "Print the Claude Code settings that register toolgate's gate and tap",
		Long: `Prints the settings document with toolgate's PreToolUse gate (onFailure "block")
and its PostToolUse/PostToolUseFailure tap, merged into --merge without clobbering
other hooks or settings. The file given to --merge is only read.`,
		Example: `  toolgate hooks settings --agent demo > settings.json
  toolgate hooks settings --agent demo --merge .claude/settings.json > merged.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agent == "" {
				return usageErr(cmd, "--agent is required")
			}
			cfg, err := config.Load(g.home, g.configPath())
			if err != nil {
				return err
			}
			if _, ok := cfg.Agents[agent]; !ok {
				return fmt.Errorf("no agent %q in %s", agent, g.configPath())
			}
			var existing []byte
			if merge != "" {
				if existing, err = os.ReadFile(merge); err != nil {
					return err
				}
			}
			out, err := hooks.MergeSettings(existing, hooks.GateCommand{Command: sandbox.ClientPath, Timeout: timeout})
			if err != nil {
				return fmt.Errorf("%s: %w (the file is left as it was)", merge, err)
			}
			_, err = os.Stdout.Write(out)
			return err
		},
	}
	settings.Flags().StringVar(&agent, "agent", "", "the agent whose sandbox runs Claude Code")
	settings.Flags().StringVar(&merge, "merge", "", "an existing settings file to merge into (read only)")
	settings.Flags().IntVar(&timeout, "timeout", hooks.DefaultGateTimeout, "the gate's hook timeout in seconds")
	cmd.AddCommand(settings)
	return cmd
}
