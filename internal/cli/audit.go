package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/auditquery"
)

// AuditLocal is what the audit commands do without a gateway to ask, and
// what only toolgate-gateway links the code for: the session tree and the
// fleet database. toolgate-cli's (handOn) hands the command line to
// toolgate-gateway; toolgate-gateway's (gatewaycmd) reads the index and the
// files itself.
type AuditLocal interface {
	// Find answers q from the index beside the log, which it may write
	// only as its one writer (auditindex): when no gateway runs.
	Find(cmd *cobra.Command, g *Globals, q auditquery.Query) ([]auditquery.Hit, error)
	// Reindex rebuilds the index from the log, no gateway running.
	Reindex(cmd *cobra.Command, g *Globals) (int, error)
	// ShowSession prints a session's calls as trees, one per agent, or
	// agent's alone when given (audit show --session).
	ShowSession(cmd *cobra.Command, g *Globals, session, agent string) error
	// QueryFleet answers q from the fleet database (audit query --all-gateways).
	QueryFleet(cmd *cobra.Command, g *Globals, q auditquery.Query, format string) error
}

// auditGatewayCommands are the audit commands toolgate-cli hands to
// toolgate-gateway as they are, with their short help
// (TestThinTreeListsEveryCommand keeps it theirs).
var auditGatewayCommands = []gatewayCommand{
	{"tail", "Print the last entries, optionally following new ones"},
	{"verify", "Check the audit log (chain, tree, signed checkpoints) or a receipt; name the first bad entry"},
	{"receipt", "Write a receipt anyone can verify offline: a session's (a call's, an agent's) entries, each proved in a signed checkpoint"},
}

// newAuditCmd is toolgate-cli's audit: show, query and reindex ask the
// running gateway, the rest is toolgate-gateway's.
func newAuditCmd(g *Globals) *cobra.Command {
	return NewAuditCmd(g, handOn{}, standIns(auditGatewayCommands)...)
}

// NewAuditCmd returns the audit command group: show, query and reindex,
// answered by the gateway of the home when it runs (its index, caught up
// for each question) and by local otherwise; more are the group's other
// commands.
func NewAuditCmd(g *Globals, local AuditLocal, more ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read and verify the audit log"}
	cmd.AddCommand(more...)
	cmd.AddCommand(newAuditShowCmd(g, local), newAuditQueryCmd(g, local), newAuditReindexCmd(g, local))
	return cmd
}

// FindAudit answers q from the running gateway's index, else through local.
func FindAudit(cmd *cobra.Command, g *Globals, local AuditLocal, q auditquery.Query) ([]auditquery.Hit, error) {
	hits, err := AskGateway(cmd, g, q)
	if GatewayDown(g, err) {
		return local.Find(cmd, g, q)
	}
	return hits, err
}

// AskGateway answers q from the gateway's index over its admin API.
func AskGateway(cmd *cobra.Command, g *Globals, q auditquery.Query) ([]auditquery.Hit, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	c, err := g.Dial()
	if err != nil {
		return nil, err
	}
	return c.AuditFind(cmd.Context(), q)
}

// GatewayDown reports whether err says that no gateway of this home
// answers (none runs, or none was ever set up), so its files are for this
// process to read. A context's gateway is elsewhere: its files are not here.
func GatewayDown(g *Globals, err error) bool {
	return g.Context == "" && (errors.Is(err, adminclient.ErrDaemonDown) || errors.Is(err, fs.ErrNotExist))
}

func newAuditShowCmd(g *Globals, local AuditLocal) *cobra.Command {
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
		Args: Words(0, 1, "[ID]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if session != "" {
				if len(args) > 0 {
					return UsageErr(cmd, "give a call id or --session, not both")
				}
				return local.ShowSession(cmd, g, session, agent)
			}
			if agent != "" {
				return UsageErr(cmd, "--agent goes with --session")
			}
			if len(args) == 0 {
				return UsageErr(cmd, "give a call id, or --session SESSION")
			}
			hits, err := FindAudit(cmd, g, local, auditquery.Query{ID: args[0]})
			if err != nil {
				return err
			}
			if len(hits) == 0 {
				return errors.New("no audit entry with id " + args[0])
			}
			// The same JSON for any reader, its strings' control and
			// format characters written as \u escapes: printed to a
			// terminal, an entry cannot act on it.
			for _, h := range hits {
				b, err := json.MarshalIndent(h.Entry, "", "  ")
				if err != nil {
					return err
				}
				if _, err := cmd.OutOrStdout().Write(append(textsafe.JSON(b), '\n')); err != nil {
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

func newAuditReindexCmd(g *Globals, local AuditLocal) *cobra.Command {
	return &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the audit index from the log files",
		Long: `Rebuilds the audit index from the log files. With the gateway running, the
gateway builds the new index beside the one in use, which answers meanwhile,
and swaps it in; otherwise this command builds it.`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			var n int
			c, err := g.Dial()
			if err == nil {
				var ans *api.Reindexed
				if ans, err = c.AuditReindex(cmd.Context()); err == nil {
					n = ans.Entries
				}
			}
			if GatewayDown(g, err) {
				n, err = local.Reindex(cmd, g)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "indexed %d entries in %s\n", n, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

// handOn is toolgate-cli's AuditLocal: each case replaces this process with
// toolgate-gateway, given the same command line.
type handOn struct{}

func (handOn) Find(cmd *cobra.Command, _ *Globals, _ auditquery.Query) ([]auditquery.Hit, error) {
	return nil, execGateway(cmd, os.Args[1:])
}

func (handOn) Reindex(cmd *cobra.Command, _ *Globals) (int, error) {
	return 0, execGateway(cmd, os.Args[1:])
}

func (handOn) ShowSession(cmd *cobra.Command, _ *Globals, _, _ string) error {
	return execGateway(cmd, os.Args[1:])
}

func (handOn) QueryFleet(cmd *cobra.Command, _ *Globals, _ auditquery.Query, _ string) error {
	return execGateway(cmd, os.Args[1:])
}
