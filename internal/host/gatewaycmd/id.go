package gatewaycmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/identity"
)

// newIDCmd prints who this gateway is to the world: its id and the
// verifier keys its checkpoints and receipts are checked with.
func newIDCmd(g *cli.Globals) *cobra.Command {
	var asJSON, rotate bool
	cmd := &cobra.Command{
		Use:   "id",
		Short: "Print this gateway's id and the key its audit checkpoints and receipts are checked with",
		Long: `Print this gateway's id and its verifier key: give the key to whoever checks a receipt
(toolgate audit verify --receipt FILE --key KEY, or toolgate-verify). The signing key is
HOME/gateway.key (0600), made by toolgate init or the first serve.

--rotate keeps the current key as HOME/gateway.key.<time> and makes a new one. Restart the
gateway after it: its next checkpoint is signed by both keys, so a verifier that holds
only the old one can follow the hand-over; keep the old verifier key for older receipts.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var keys *identity.Keys
			var err error
			if rotate {
				keys, err = identity.Rotate(g.Home, time.Now())
			} else {
				keys, err = identity.Load(g.Home)
			}
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no gateway key in %s yet: run toolgate init", g.Home)
			}
			if err != nil {
				return err
			}
			if asJSON {
				out := struct {
					Origin string   `json:"origin"`
					Key    string   `json:"key"`
					Old    []string `json:"oldKeys,omitempty"`
				}{Origin: keys.Origin, Key: keys.Current.Verifier}
				for _, o := range keys.Old {
					out.Old = append(out.Old, o.Verifier)
				}
				return json.NewEncoder(os.Stdout).Encode(out)
			}
			fmt.Printf("origin  %s\nkey     %s\n", keys.Origin, keys.Current.Verifier)
			for _, o := range keys.Old {
				fmt.Printf("old     %s\n", o.Verifier)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().BoolVar(&rotate, "rotate", false, "make a new signing key, keeping the old one beside it")
	return cmd
}
