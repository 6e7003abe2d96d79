package cli

import (
	"path/filepath"

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
	)
	return root
}
