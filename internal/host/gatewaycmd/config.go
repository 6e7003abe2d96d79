package gatewaycmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/config"
)

func newConfigCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Inspect the configuration"}
	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Validate the config file: every problem with its line, rules compiled",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(g.Home, g.Config)
			if err != nil {
				return err
			}
			if _, err := assemble.Build(cfg, nil, nil); err != nil {
				return err
			}
			n := func(k int, noun string) string {
				if k != 1 {
					noun += "s"
				}
				return fmt.Sprintf("%d %s", k, noun)
			}
			fmt.Printf("%s: ok (%s, %s)\n", cfg.Path, n(len(cfg.Agents), "agent"), n(len(cfg.Plugins), "plugin"))
			return nil
		},
	})
	return cmd
}
