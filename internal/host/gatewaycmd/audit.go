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
)

// newAuditCmd is toolgate-gateway's audit: toolgate's show, query and
// reindex (which read the index themselves when no gateway answers), and
// the commands that read the log files.
func newAuditCmd(g *cli.Globals) *cobra.Command {
	return cli.NewAuditCmd(g, local{}, newAuditTailCmd(g), newAuditVerifyCmd(g))
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
	return &cobra.Command{
		Use:   "verify",
		Short: "Check the hash chain across all audit files; name the first bad line",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := auditDir(g)
			if err != nil {
				return err
			}
			rep, err := audit.Verify(dir)
			if err != nil {
				return err
			}
			if !rep.OK() {
				return fmt.Errorf("audit chain broken after %d good entries: %s", rep.Entries, rep.Bad)
			}
			fmt.Printf("ok: %d entries in %d files, chain intact (last hash %.16s…)\n", rep.Entries, rep.Files, rep.Last)
			return nil
		},
	}
}
