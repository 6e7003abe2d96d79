package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/auditquery"
)

func newAuditQueryCmd(g *Globals, local AuditLocal) *cobra.Command {
	var (
		q      auditquery.Query
		since  WhenFlag
		until  WhenFlag
		format string
		fleet  bool
	)
	cmd := &cobra.Command{
		Use:   "query [--agent A] [--tool T] [--decision deny] [--since 2h] [--text WORDS] …",
		Short: "Find audit entries through the index (any log size): by agent, tool, type, decision, rule, session, parent, time, words in the arguments",
		Long: `Answers from the audit index (HOME/logs/index.sqlite, SQLite), which follows the
JSON-lines log; the log stays the source of truth (audit verify checks it). The
index is caught up before answering: by the running gateway, which keeps it
and answers over its admin API, or by this command when no gateway runs.
Pages: --limit N (default 100, at most 10000) and --after SEQ, the seq of the
last entry of the previous page (printed in json output and as the first
column of text output).

--all-gateways answers from the fleet database (gateway.audit.postgres) that
every gateway of the fleet copies its log into, with the same filters; each
row shows its gateway id, and --after takes the first column (N, the fleet's
arrival order).`,
		Example: `  toolgate audit query --agent demo --decision deny --since 2h --tool exec
  toolgate audit query --session S --format json | jq .
  toolgate audit query --text "rm -rf" --newest --limit 20`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format is text or json, not %q", format)
			}
			q.Since, q.Until = since.Cutoff(), until.Cutoff()
			if fleet {
				return local.QueryFleet(cmd, g, q, format)
			}
			hits, err := FindAudit(cmd, g, local, q)
			if err != nil {
				return err
			}
			return PrintHits(cmd.OutOrStdout(), hits, format, func(h auditquery.Hit) (string, *api.Entry) {
				return fmt.Sprintf("%-7d ", h.Seq), h.Entry
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Agent, "agent", "", "only this agent")
	f.StringVar(&q.Tool, "tool", "", "only this tool")
	f.StringVar(&q.Type, "type", "", "only this type: core_tool, tool, hook, egress, model, admin, observed")
	f.StringVar(&q.Decision, "decision", "", "only this decision: allow, deny, ask …")
	f.StringVar(&q.Rule, "rule", "", "only entries decided by this rule")
	f.StringVar(&q.Session, "session", "", "only this session (a session is one agent's: give --agent when several agents' entries name it)")
	f.StringVar(&q.Parent, "parent", "", "only calls caused by this call id (calls of its own agent)")
	f.StringVar(&q.Phase, "phase", "", "only this phase: decision, result, ask")
	f.Var(&since, "since", "only entries since then: how long ago (2h, 7d) or an RFC 3339 time")
	f.Var(&until, "until", "only entries before then: how long ago (1h, 2d) or an RFC 3339 time")
	f.StringVar(&q.Text, "text", "", "words that must all appear in the arguments (full-text, not SQL)")
	f.IntVar(&q.Limit, "limit", 100, "entries per page (1–10000)")
	f.Int64Var(&q.After, "after", 0, "continue after this seq (from the previous page)")
	f.BoolVar(&q.Newest, "newest", false, "newest first")
	f.StringVar(&format, "format", "text", "text or json (one JSON object per line: seq and entry)")
	f.BoolVar(&fleet, "all-gateways", false, "every gateway's entries, from the fleet database (gateway.audit.postgres)")
	return cmd
}

// PrintHits writes a query's hits: one JSON object per line, or each
// entry's line after its position (line gives both).
func PrintHits[H any](out io.Writer, hits []H, format string, line func(H) (string, *api.Entry)) error {
	for _, h := range hits {
		if format == "json" {
			b, err := json.Marshal(h)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, string(b))
			continue
		}
		pos, e := line(h)
		io.WriteString(out, pos)
		if err := PrintEntry(out, e); err != nil {
			return err
		}
	}
	return nil
}

// PrintEntry writes e as one line for people. Every field a request could
// carry (the agent's tool names, arguments, reasons quoting them) is
// rendered by textsafe: nothing in an entry can reach the terminal as a
// control sequence or start a line of its own.
func PrintEntry(w io.Writer, e *api.Entry) error {
	var b strings.Builder
	// The whole id: it is what `audit show` takes, and its leading digits
	// are a timestamp, so a prefix does not tell calls apart.
	fmt.Fprintf(&b, "%s  %s  %-8s %-6s %-9s %-10s %-5s", e.TS.Local().Format("15:04:05.000"), textsafe.Line(e.ID), e.Phase,
		textsafe.Line(OrDash(e.Agent)), e.Type, textsafe.Line(e.Tool), textsafe.Line(e.Decision))
	if e.Rule != "" {
		fmt.Fprintf(&b, " [%s]", textsafe.Line(e.Rule))
	}
	if e.Reason != "" && e.Decision == "deny" {
		fmt.Fprintf(&b, " %s", textsafe.Line(e.Reason))
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
	if len(e.Args) > 0 && e.Phase == api.PhaseDecision {
		args, _ := textsafe.Clip(string(e.Args), 120)
		fmt.Fprintf(&b, " %s", args)
	}
	_, err := fmt.Fprintln(w, b.String())
	return err
}

// OrDash is s, or "-" for nothing.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
