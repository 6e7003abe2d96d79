package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/proto/proof"
)

func newAuditReceiptCmd(g *cli.Globals) *cobra.Command {
	var (
		sel   proof.Selection
		since cli.WhenFlag
		out   string
	)
	cmd := &cobra.Command{
		Use:   "receipt",
		Short: "Write a receipt anyone can verify offline: a session's (a call's, an agent's) entries, each proved in a signed checkpoint",
		Long: `Write one self-contained file: the selected entries as the log holds them (redacted as
it is), an inclusion proof of each in a checkpoint of the log's Merkle tree signed with the
gateway's key, the checkpoint, and a manifest signed with the key that lists every entry
selected, so a receipt missing one fails. Nothing of other entries is in it but hashes.

Check it with nothing but the file and the key toolgate id prints:
  toolgate audit verify --receipt FILE --key KEY    (or toolgate-verify, built from one package)

With a gateway running, it signs a checkpoint now, so the receipt covers everything
written; otherwise the latest checkpoint in the log (a gateway writes one as it stops).`,
		Example: "  toolgate audit receipt --session s-42 -o s-42.receipt.json\n  toolgate audit receipt --call c-0190…\n  toolgate audit receipt --agent demo --since 1h",
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if t := since.Cutoff(); !t.IsZero() {
				sel.Since = t.UTC().Format(time.RFC3339Nano)
			}
			if sel.Session == "" && sel.Call == "" && sel.Since == "" {
				return cli.UsageErr(cmd, "say what the receipt is of: --session, --call, or --agent with --since")
			}
			dir, err := auditDir(g)
			if err != nil {
				return err
			}
			keys, err := identity.Load(g.Home)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no gateway key in %s: a gateway that signs checkpoints has one (toolgate init, toolgate serve)", g.Home)
			} else if err != nil {
				return err
			}
			cp, err := checkpointNow(g, dir)
			if err != nil {
				return err
			}
			r, later, err := audit.Receipt(dir, cp, keys.Current.Signer, keys.Current.Verifier, sel)
			if err != nil {
				return err
			}
			b, err := r.Marshal()
			if err != nil {
				return err
			}
			w := os.Stdout
			if out != "" && out != "-" {
				if w, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
					return err
				}
				defer w.Close()
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "receipt of %d entries (%s); verify with --key %s\n", len(r.Entries), r.Selection, keys.Current.Verifier)
			if later > 0 {
				fmt.Fprintf(os.Stderr, "%d entries written after that checkpoint are not in it: start the gateway, or wait for its next checkpoint\n", later)
			}
			return w.Close()
		},
	}
	cmd.Flags().StringVar(&sel.Session, "session", "", "the entries of this session")
	cmd.Flags().StringVar(&sel.Call, "call", "", "the entries of this call (its decision and result)")
	cmd.Flags().StringVar(&sel.Agent, "agent", "", "only this agent's entries (needed with --since)")
	cmd.Flags().Var(&since, "since", "only entries since then: how long ago (1h, 7d) or an RFC 3339 time")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the receipt to this new file (default: stdout)")
	return cmd
}

// checkpointNow is a checkpoint covering the whole log: signed now by the
// running gateway, or the latest the log holds when none runs.
func checkpointNow(g *cli.Globals, dir string) ([]byte, error) {
	if c, err := g.Dial(); err == nil {
		ans, err := c.AuditCheckpoint(context.Background())
		switch {
		case err == nil:
			return []byte(ans.Checkpoint), nil
		case !errors.Is(err, adminclient.ErrDaemonDown):
			return nil, fmt.Errorf("asking the gateway for a checkpoint: %w", err)
		}
	}
	cp, err := audit.LatestCheckpoint(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("the log has no signed checkpoint yet: a gateway writes one every 1000 entries, 30 s after the last, and as it stops")
	}
	return cp, err
}
