package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/config"
)

// globals are the flags every command shares.
type globals struct {
	home   string
	config string
}

func (g *globals) configPath() string {
	if g.config != "" {
		return g.config
	}
	return filepath.Join(g.home, "config.yaml")
}

// NewRootCmd returns the toolgate command tree.
func NewRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "toolgate",
		Short:         "One chokepoint for every tool call an AI agent makes",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.home != "" {
				return nil
			}
			var err error
			g.home, err = config.Home()
			return err
		},
	}
	root.PersistentFlags().StringVar(&g.home, "home", "", "toolgate home (default $TOOLGATE_HOME or ~/.toolgate)")
	root.PersistentFlags().StringVar(&g.config, "config", "", "config file (default HOME/config.yaml)")
	root.AddCommand(
		newInitCmd(g), newServeCmd(g), newAgentsCmd(g), newExecCmd(g), newReadCmd(g),
		newWriteCmd(g), newPatchCmd(g), newCallCmd(g), newAuditCmd(g), newPolicyCmd(g),
		newConfigCmd(g), newSandboxCmd(g),
		newHooksCmd(g), newRunCmd(g), newIngestCmd(g),
		newTokenCmd(g),
		newToolsCmd(g),
		newApprovalsCmd(g),
		newSecretsCmd(g), newUsageCmd(g),
		newAgentCmd(g),
	)
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group fail on an argument
// that names none of its subcommands. Cobra checks that only on the root:
// `toolgate policy nosuch` printed the group's help and exited 0, so a typo
// in a script passed silently.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if !cmd.HasParent() || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on the root
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
		}
		return fmt.Errorf("%s\nsee: %s --help", msg, cmd.CommandPath())
	}
}
