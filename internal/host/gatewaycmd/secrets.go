package gatewaycmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/secrets"
)

func newSecretsCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "Manage host-side secrets (HOME/secrets.yaml, 0600; never mounted into a sandbox)"}
	cmd.AddCommand(newSecretsSetCmd(g))
	return cmd
}

func newSecretsSetCmd(g *cli.Globals) *cobra.Command {
	var from string
	var agents, tools []string
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Store a secret (a model provider's API key, a plugin's token) from stdin or a file",
		Long: `Reads the value from stdin (or --from), drops one trailing newline and stores it
in HOME/secrets.yaml (created 0600, replaced atomically). A key file other users can
read is refused: the key is exposed already. Without --agent/--tool a new secret is
granted to every agent and tool ("*"); an existing one keeps its grants. A running
gateway takes it on reload (SIGHUP) or restart.`,
		Example: "  toolgate secrets set anthropic_key < key.txt\n  toolgate secrets set gh_token --from ~/.config/gh/token --agent demo --tool gh",
		Args:    cli.Words(1, 1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, name := os.Stdin, "stdin"
			if from != "" {
				var err error
				if f, err = os.Open(from); err != nil {
					return fmt.Errorf("the key file: %w", err)
				}
				defer f.Close()
				name = from
			}
			value, err := secrets.ReadKey(f, name)
			if err != nil {
				return err
			}
			var a, t []string
			if cmd.Flags().Changed("agent") {
				a = agents
			}
			if cmd.Flags().Changed("tool") {
				t = tools
			}
			if a == nil && t == nil {
				if s, err := secrets.Load(g.Home, nil); err != nil || !s.Has(args[0]) {
					a, t = []string{"*"}, []string{"*"}
				}
			}
			if err := secrets.Set(g.Home, args[0], value, a, t); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s stored in %s/%s (a running gateway takes it on reload, SIGHUP, or restart)\n", args[0], g.Home, secrets.FileName)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "read the value from this file instead of stdin")
	cmd.Flags().StringSliceVar(&agents, "agent", nil, "agents that may use it (repeatable; * for all)")
	cmd.Flags().StringSliceVar(&tools, "tool", nil, "tools or model providers that may use it (repeatable; * for all)")
	return cmd
}
