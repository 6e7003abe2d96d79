package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auditpg"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/lib/pidlock"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/auditquery"
)

// local is toolgate-gateway's cli.AuditLocal: with no gateway running, the
// audit commands open the index beside the log themselves, as its one
// writer (auditindex), and the session tree and the fleet database are
// here.
type local struct{}

// Find catches the index up and answers q. An index that cannot be opened
// at all (a log directory this user may read but not write) leaves a
// call's or a session's entries to be read from the files.
func (local) Find(cmd *cobra.Command, g *cli.Globals, q auditquery.Query) ([]auditquery.Hit, error) {
	var hits []auditquery.Hit
	err := withIndex(cmd, g, func(x *auditindex.Index) error {
		if _, err := x.CatchUp(); err != nil {
			return err
		}
		var err error
		hits, err = x.Find(q)
		return err
	}, func() (err error) {
		hits, err = cli.AskGateway(cmd, g, q)
		return err
	})
	var unusable *indexUnusable
	byCall := auditquery.Query{ID: q.ID, Session: q.Session, Limit: q.Limit, After: q.After}
	if errors.As(err, &unusable) && q == byCall && (q.ID != "" || q.Session != "") {
		return scanFiles(unusable.dir, q)
	}
	return hits, err
}

func (local) Reindex(cmd *cobra.Command, g *cli.Globals) (int, error) {
	var n int
	err := withIndex(cmd, g, func(x *auditindex.Index) (err error) {
		n, err = x.Rebuild(cmd.Context())
		return err
	}, func() error {
		c, err := g.Dial()
		if err != nil {
			return err
		}
		ans, err := c.AuditReindex(cmd.Context())
		if err == nil {
			n = ans.Entries
		}
		return err
	})
	return n, err
}

// indexUnusable is an index that could not be opened for a reason other
// than another writer.
type indexUnusable struct {
	dir string
	err error
}

func (e *indexUnusable) Error() string { return e.err.Error() }
func (e *indexUnusable) Unwrap() error { return e.err }

// withIndex runs use with the index open as its one writer. While another
// process holds it — a gateway coming up, another audit command — it
// waits, asking the gateway meanwhile (ask), which answers once it is up.
func withIndex(cmd *cobra.Command, g *cli.Globals, use func(*auditindex.Index) error, ask func() error) error {
	dir, err := auditDir(g)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	say := time.Now().Add(2 * time.Second)
	for {
		x, err := auditindex.Open(dir, log)
		if err == nil {
			defer x.Close()
			return use(x)
		}
		var held *pidlock.HeldError
		if !errors.As(err, &held) {
			return &indexUnusable{dir: dir, err: err}
		}
		if err := ask(); !cli.GatewayDown(g, err) {
			return err
		}
		if time.Now().After(say) {
			fmt.Fprintf(cmd.ErrOrStderr(), "toolgate: waiting for the audit index, which %s is writing\n", held.Holder())
			say = time.Now().Add(time.Hour)
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scanFiles reads a call's or a session's entries from the log files, a
// page as the index gives it.
func scanFiles(dir string, q auditquery.Query) ([]auditquery.Hit, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	var hits []auditquery.Hit
	var seq int64
	err := audit.Query(dir, audit.Filter{}, func(e *gateway.Entry) error {
		seq++
		if seq > q.After && len(hits) < q.Limit && (q.ID == "" || e.ID == q.ID) && (q.Session == "" || e.Session == q.Session) {
			hits = append(hits, auditquery.Hit{Seq: seq, Entry: e})
		}
		return nil
	})
	return hits, err
}

// ShowSession prints a session's calls as trees, one per agent.
func (local) ShowSession(cmd *cobra.Command, g *cli.Globals, session, agent string) error {
	entries, err := sessionEntries(cmd, g, session, agent)
	if err != nil {
		return err
	}
	if len(entries) == 0 && agent != "" {
		return errors.New("no audit entry of agent " + agent + " with session " + session)
	}
	if len(entries) == 0 {
		return errors.New("no audit entry with session " + session)
	}
	printSessionTree(cmd.OutOrStdout(), session, entries)
	return nil
}

// QueryFleet answers q from the fleet database named in the configuration.
func (local) QueryFleet(cmd *cobra.Command, g *cli.Globals, q auditquery.Query, format string) error {
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
		if errors.Is(err, auditquery.ErrBadQuery) {
			return err
		}
		return fmt.Errorf("fleet database %s: %w", auditpg.Redact(cfg.Gateway.Audit.Postgres.DSN), err)
	}
	return cli.PrintHits(cmd.OutOrStdout(), hits, format, func(h auditpg.Hit) (string, *gateway.Entry) {
		return fmt.Sprintf("%-7d %-20s ", h.N, textsafe.Line(h.Gateway)), h.Entry
	})
}
