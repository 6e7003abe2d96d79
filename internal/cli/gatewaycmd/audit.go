package gatewaycmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
)

func newAuditCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read and verify the audit log"}
	cmd.AddCommand(newAuditTailCmd(g), newAuditVerifyCmd(g), newAuditShowCmd(g), newAuditQueryCmd(g), newAuditReindexCmd(g))
	return cmd
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
		since  whenFlag
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
			f.Since = since.cutoff()
			print := printEntry
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

func newAuditShowCmd(g *cli.Globals) *cobra.Command {
	var session, agent string
	cmd := &cobra.Command{
		Use:   "show ID | show --session SESSION [--agent AGENT]",
		Short: "Print every entry of one call (its decision and its result) as JSON, or a session as a tree",
		Long: `With --session, prints the session's calls as a tree, each call under the call
that caused it. A session is one agent's: the session and parent a call carries
are hints from its sandbox, so a call is linked only to calls of its own agent,
and when calls of several agents name the session each agent's are a tree of
their own (--agent shows one).`,
		Example: `  toolgate audit show 18ed0cfbfd94ff20bf07a49b2d0b52c4
  toolgate audit show --session 18ed0cfbf8227ea357e317a3095b6d21   # model calls, the tool calls they caused …`,
		Args: cli.Words(0, 1, "[ID]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := auditDir(g)
			if err != nil {
				return err
			}
			if session != "" {
				if len(args) > 0 {
					return cli.UsageErr(cmd, "give a call id or --session, not both")
				}
				entries, err := sessionEntries(dir, session, agent)
				if err != nil {
					return err
				}
				if len(entries) == 0 && agent != "" {
					return errors.New("no audit entry of agent " + agent + " with session " + session)
				}
				if len(entries) == 0 {
					return errors.New("no audit entry with session " + session)
				}
				printSessionTree(os.Stdout, session, entries)
				return nil
			}
			if agent != "" {
				return cli.UsageErr(cmd, "--agent goes with --session")
			}
			if len(args) == 0 {
				return cli.UsageErr(cmd, "give a call id, or --session SESSION")
			}
			entries, err := findCall(dir, args[0])
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				return errors.New("no audit entry with id " + args[0])
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			for _, e := range entries {
				if err := enc.Encode(e); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "print this session's calls as a tree (each under the call that caused it)")
	cmd.Flags().StringVar(&agent, "agent", "", "with --session: only this agent's calls")
	return cmd
}

// printEntry writes one entry as a line for people.
func printEntry(e *gateway.Entry) error { return printEntryTo(os.Stdout, e) }

func printEntryTo(w io.Writer, e *gateway.Entry) error {
	var b strings.Builder
	// The whole id: it is what `audit show` takes, and its leading digits
	// are a timestamp, so a prefix does not tell calls apart.
	fmt.Fprintf(&b, "%s  %s  %-8s %-6s %-9s %-10s %-5s", e.TS.Local().Format("15:04:05.000"), e.ID, e.Phase,
		orDash(e.Agent), e.Type, e.Tool, e.Decision)
	if e.Rule != "" {
		fmt.Fprintf(&b, " [%s]", e.Rule)
	}
	if e.Reason != "" && e.Decision == "deny" {
		fmt.Fprintf(&b, " %s", e.Reason)
	}
	if e.ExitCode != nil {
		fmt.Fprintf(&b, " exit=%d", *e.ExitCode)
	}
	if e.DurationMs != nil {
		fmt.Fprintf(&b, " %.1fms", *e.DurationMs)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, " error=%q", e.Error)
	}
	if len(e.Args) > 0 && e.Phase == gateway.PhaseDecision {
		args := string(e.Args)
		if len(args) > 120 {
			args = args[:120] + "…"
		}
		fmt.Fprintf(&b, " %s", args)
	}
	_, err := fmt.Fprintln(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
