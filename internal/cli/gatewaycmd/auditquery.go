package gatewaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auditindex"
	"github.com/toolgate/toolgate/internal/auditpg"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/secrets"
)

// openIndex opens the audit index beside the log and catches it up, so an
// answer covers every entry written so far, daemon running or not.
func openIndex(dir string) (*auditindex.Index, error) {
	x, err := auditindex.Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	if _, err := x.CatchUp(); err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

func newAuditQueryCmd(g *cli.Globals) *cobra.Command {
	var (
		q      auditindex.Query
		since  whenFlag
		until  whenFlag
		format string
		fleet  bool
	)
	cmd := &cobra.Command{
		Use:   "query [--agent A] [--tool T] [--decision deny] [--since 2h] [--text WORDS] …",
		Short: "Find audit entries through the index (any log size): by agent, tool, type, decision, rule, session, parent, time, words in the arguments",
		Long: `Answers from the audit index (HOME/logs/index.sqlite, SQLite), which follows the
JSON-lines log; the log stays the source of truth (audit verify checks it). The
index is caught up before answering. Pages: --limit N (default 100, at most
10000) and --after SEQ, the seq of the last entry of the previous page (printed
in json output and as the first column of text output).

--all-gateways answers from the fleet database (gateway.audit.postgres) that
every gateway of the fleet copies its log into, with the same filters; each
row shows its gateway id, and --after takes the first column (N, the fleet's
arrival order).`,
		Example: `  toolgate audit query --agent demo --decision deny --since 2h --tool exec
  toolgate audit query --session S --format json | jq .
  toolgate audit query --text "rm -rf" --newest --limit 20`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format is text or json, not %q", format)
			}
			q.Since, q.Until = since.cutoff(), until.cutoff()
			if fleet {
				return queryFleet(cmd, g, q, format)
			}
			dir, err := auditDir(g)
			if err != nil {
				return err
			}
			x, err := openIndex(dir)
			if err != nil {
				return err
			}
			defer x.Close()
			hits, err := x.Find(q)
			if err != nil {
				return err
			}
			return printHits(cmd.OutOrStdout(), hits, format, func(h auditindex.Hit) (string, *gateway.Entry) {
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

// queryFleet answers q from the fleet database named in the configuration.
func queryFleet(cmd *cobra.Command, g *cli.Globals, q auditindex.Query, format string) error {
	cfg, err := config.Load(g.Home, g.ConfigPath())
	if err != nil {
		return err
	}
	if cfg.Gateway.Audit.Postgres == nil {
		return fmt.Errorf("--all-gateways reads the fleet database, and gateway.audit.postgres is not configured")
	}
	store, err := secrets.Load(g.Home, cfg.Secrets)
	if err != nil {
		return err
	}
	dsn, err := auditpg.ExpandDSN(cfg.Gateway.Audit.Postgres.DSN, store)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
	defer cancel()
	s, err := auditpg.Open(ctx, dsn, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer s.Close()
	hits, err := s.Find(ctx, q)
	if err != nil {
		if errors.Is(err, auditindex.ErrBadQuery) {
			return err
		}
		return fmt.Errorf("fleet database %s: %w", auditpg.Redact(cfg.Gateway.Audit.Postgres.DSN), err)
	}
	return printHits(cmd.OutOrStdout(), hits, format, func(h auditpg.Hit) (string, *gateway.Entry) {
		return fmt.Sprintf("%-7d %-20s ", h.N, h.Gateway), h.Entry
	})
}

// printHits writes a query's hits: one JSON object per line, or each
// entry's line after its position (line gives both).
func printHits[H any](out io.Writer, hits []H, format string, line func(H) (string, *gateway.Entry)) error {
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
		if err := printEntryTo(out, e); err != nil {
			return err
		}
	}
	return nil
}

func newAuditReindexCmd(g *cli.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the audit index from the log files",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := auditDir(g)
			if err != nil {
				return err
			}
			x, err := auditindex.Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				return err
			}
			defer x.Close()
			start := time.Now()
			n, err := x.Rebuild()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "indexed %d entries in %s\n", n, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

// findCall returns every entry of one call: from the index, or by reading
// the files when the index cannot be opened.
func findCall(dir, id string) ([]*gateway.Entry, error) {
	x, err := openIndex(dir)
	if err != nil {
		return audit.Find(dir, id)
	}
	defer x.Close()
	hits, err := x.Find(auditindex.Query{ID: id})
	if err != nil {
		return nil, err
	}
	out := make([]*gateway.Entry, len(hits))
	for i, h := range hits {
		out[i] = h.Entry
	}
	return out, nil
}
