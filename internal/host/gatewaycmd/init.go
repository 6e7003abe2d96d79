package gatewaycmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/proto/api"
)

func newInitCmd(g *cli.Globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented config, an admin token and the gateway's signing key into the toolgate home",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(g.Home, 0o700); err != nil {
				return err
			}
			path := g.ConfigPath()
			switch _, err := os.Stat(path); {
			case err == nil && !force:
				fmt.Fprintf(os.Stderr, "keeping existing %s (use --force to overwrite)\n", path)
			case err == nil || errors.Is(err, os.ErrNotExist):
				if err := os.WriteFile(path, []byte(config.DefaultYAML(g.Home)), 0o600); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "wrote %s\n", path)
			default:
				return err
			}
			// The key that signs the audit log's checkpoints and receipts.
			switch keys, created, err := identity.Ensure(g.Home); {
			case err != nil:
				return err
			case created:
				fmt.Fprintf(os.Stderr, "wrote gateway key %s (0600); its verifier key (toolgate id):\n  %s\n", keys.Current.File, keys.Current.Verifier)
			default:
				fmt.Fprintf(os.Stderr, "keeping existing gateway key %s\n", keys.Current.File)
			}
			tokenPath := filepath.Join(g.Home, api.TokenFile)
			if _, err := os.Stat(tokenPath); err == nil && !force {
				fmt.Fprintf(os.Stderr, "keeping existing admin token %s\n", tokenPath)
				return nil
			}
			store, err := auth.OpenStore(filepath.Join(g.Home, auth.StoreFile))
			if err != nil {
				return err
			}
			secret, _, err := store.Create(auth.ScopeAdmin, "", 0)
			if err != nil {
				return err
			}
			if err := os.WriteFile(tokenPath, []byte(secret+"\n"), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote admin token %s (0600)\n", tokenPath)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing config and admin token")
	return cmd
}
