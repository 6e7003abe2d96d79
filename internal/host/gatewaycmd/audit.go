package gatewaycmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/proto/proof"
)

// newAuditCmd is toolgate-gateway's audit: toolgate's show, query and
// reindex (which read the index themselves when no gateway answers), and
// the commands that read the log files.
func newAuditCmd(g *cli.Globals) *cobra.Command {
	return cli.NewAuditCmd(g, local{}, newAuditTailCmd(g), newAuditVerifyCmd(g), newAuditReceiptCmd(g))
}

// auditDir is the configured audit directory, HOME/logs without a config
// file. A config that exists but does not load is an error: falling back
// would read (and verify) some other directory than the daemon writes.
func auditDir(g *cli.Globals) (string, error) {
	cfg, err := config.Load(g.Home, g.Config)
	var dir string
	switch {
	case err == nil:
		dir = cfg.Gateway.Audit.Dir
	case errors.Is(err, fs.ErrNotExist):
		dir = filepath.Join(g.Home, "logs")
	default:
		return "", err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no audit log at %s yet: `toolgate serve` writes it", dir)
	}
	return dir, nil
}

func newAuditTailCmd(g *cli.Globals) *cobra.Command {
	var (
		f      audit.Filter
		n      int
		follow bool
		asJSON bool
		since  cli.WhenFlag
	)
	cmd := &cobra.Command{
		Use:     "tail",
		Short:   "Print the last entries, optionally following new ones",
		Example: "  toolgate audit tail -f --agent demo --decision deny",
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 {
				return cli.UsageErr(cmd, fmt.Sprintf("-n/--lines %d: give how many past entries to print, 0 or more", n))
			}
			f.Since = since.Cutoff()
			print := func(e *gateway.Entry) error { return cli.PrintEntry(os.Stdout, e) }
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				print = func(e *gateway.Entry) error { return enc.Encode(e) }
			}
			dir, err := auditDir(g)
			if err != nil {
				return err
			}
			return audit.Tail(cmd.Context(), dir, f, n, follow, print)
		},
	}
	cmd.Flags().StringVar(&f.Agent, "agent", "", "only this agent")
	cmd.Flags().StringVar(&f.Type, "type", "", "only this type (core_tool, tool, hook, egress, admin, observed)")
	cmd.Flags().StringVar(&f.Decision, "decision", "", "only allow or deny")
	cmd.Flags().StringVar(&f.Tool, "tool", "", "only this tool")
	cmd.Flags().Var(&since, "since", "only entries since then: how long ago (1h, 7d) or an RFC 3339 time")
	cmd.Flags().IntVarP(&n, "lines", "n", 20, "how many past entries to print (0: only new ones, with -f)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new entries")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print entries as JSON lines")
	return cmd
}

func newAuditVerifyCmd(g *cli.Globals) *cobra.Command {
	var receipt string
	var keyArgs, witnessArgs []string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log (chain, tree, signed checkpoints) or a receipt; name the first bad entry",
		Long: `Without --receipt: check the log of this home — every line's hash and its link to the one
before, across rotated files; the Merkle tree against the lines; each checkpoint against the
tree before it and its signature against the gateway's keys — and name the first bad entry
or checkpoint.

With --receipt FILE --key KEY: check a receipt with nothing but the file and the key (no
home, no log): each entry's proof, the checkpoint's and the manifest's signatures, and that
no entry the manifest lists is missing. Exit status 1 when it is invalid, naming why.`,
		Example: "  toolgate audit verify\n  toolgate audit verify --receipt s-42.receipt.json --key 'toolgate/gw-…+…+…'",
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if receipt != "" || len(keyArgs) > 0 {
				if receipt == "" || len(keyArgs) == 0 {
					return cli.UsageErr(cmd, "a receipt is checked with --receipt FILE and --key KEY (toolgate id prints the key)")
				}
				return verifyReceipt(receipt, keyArgs, witnessArgs)
			}
			dir, err := auditDir(g)
			if err != nil {
				return err
			}
			var opts audit.VerifyOptions
			keys, err := identity.Load(g.Home)
			switch {
			case err == nil:
				if opts.Keys, err = keys.Verifiers(); err != nil {
					return err
				}
			case !errors.Is(err, fs.ErrNotExist):
				return err
			}
			rep, err := audit.VerifyWith(dir, opts)
			if err != nil {
				return err
			}
			if !rep.OK() {
				return fmt.Errorf("audit log broken after %d good entries: %s", rep.Entries, rep.Bad)
			}
			signed := "no key in this home: signatures not checked"
			if opts.Keys != nil {
				signed = "checkpoints signed by " + keys.Origin
			}
			fmt.Printf("ok: %d entries in %d files, chain and tree intact, %s (last hash %.16s…)\n", rep.Entries, rep.Files, signed, rep.Last)
			return nil
		},
	}
	cmd.Flags().StringVar(&receipt, "receipt", "", "check this receipt instead of the log")
	cmd.Flags().StringArrayVar(&keyArgs, "key", nil, "the gateway's verifier key, or a file of keys (repeatable: keys from before a rotation)")
	cmd.Flags().StringArrayVar(&witnessArgs, "witness-key", nil, "a witness that must have cosigned the receipt's checkpoint, or a file of them (repeatable)")
	return cmd
}

// verifyReceipt checks a receipt file against keys and says valid, or
// invalid and why (exit status 1).
func verifyReceipt(file string, keyArgs, witnessArgs []string) error {
	var opts proof.Options
	var err error
	if opts.Keys, err = proof.KeyArgs(keyArgs); err != nil {
		return err
	}
	if opts.Witnesses, err = proof.KeyArgs(witnessArgs); err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	v, err := proof.Verify(data, opts)
	if rerr := proof.Report(os.Stdout, v, err); rerr != nil {
		var invalid *proof.InvalidError
		if errors.As(err, &invalid) {
			return cli.ExitCode(1)
		}
		return rerr
	}
	return nil
}
