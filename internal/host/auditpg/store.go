// Package auditpg feeds a fleet's audit entries into one PostgreSQL
// database: every gateway follows its own JSON-lines log (the source of
// truth) and copies its chain, under its gateway id, into shared tables.
// Like the SQLite index it is never on a call's path: an outage delays the
// copy, and the follower resumes from the files at the position saved in
// Postgres — in the same transaction as the rows — so nothing is lost or
// written twice.
package auditpg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/secrets"
)

// The tables are created on first use; IF NOT EXISTS lets every gateway of
// a fleet run it. Rows are keyed on the chain (gateway, hash): an entry id
// appears twice (decision and result), a chain hash once.
const schema = `
CREATE TABLE IF NOT EXISTS toolgate_audit_positions (
	gateway_id TEXT PRIMARY KEY,
	file_offset BIGINT NOT NULL,
	hash       TEXT NOT NULL,
	seq        BIGINT NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS toolgate_audit_entries (
	n          BIGSERIAL UNIQUE,  -- arrival order across the fleet: pages
	gateway_id TEXT NOT NULL,
	hash       TEXT NOT NULL,
	seq        BIGINT NOT NULL,   -- position in the gateway's chain, from 1
	ts         TIMESTAMPTZ NOT NULL,
	id         TEXT NOT NULL,
	phase      TEXT NOT NULL,
	agent      TEXT NOT NULL,
	type       TEXT NOT NULL,
	tool       TEXT NOT NULL,
	decision   TEXT NOT NULL,
	rule       TEXT NOT NULL,
	session    TEXT NOT NULL,
	parent     TEXT NOT NULL,
	args       TEXT NOT NULL,
	line       TEXT NOT NULL,     -- as written: the chain verifies from it
	PRIMARY KEY (gateway_id, hash)
);
CREATE INDEX IF NOT EXISTS toolgate_audit_entries_seq ON toolgate_audit_entries(gateway_id, seq);
CREATE INDEX IF NOT EXISTS toolgate_audit_entries_id ON toolgate_audit_entries(id);
CREATE INDEX IF NOT EXISTS toolgate_audit_entries_ts ON toolgate_audit_entries(ts);
CREATE INDEX IF NOT EXISTS toolgate_audit_entries_agent ON toolgate_audit_entries(agent, n);
CREATE INDEX IF NOT EXISTS toolgate_audit_entries_session ON toolgate_audit_entries(session) WHERE session <> '';
`

// Store is a connection pool to the fleet database. Safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu       sync.Mutex     // one feed at a time
	progress audit.Progress // the last catch-up
}

// Open connects to the database named by dsn (a postgres:// URL or
// key=value string) and creates the tables. Errors never show the DSN's
// password.
func Open(ctx context.Context, dsn string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the connection string; say only where.
		return nil, fmt.Errorf("audit postgres: the DSN is not a valid connection string (postgres://user@host/db or key=value)")
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("audit postgres %s: %w", Redact(dsn), err)
	}
	s := &Store{pool: pool, log: log}
	return s, nil
}

// Init creates the tables; a follower calls it until the database answers.
// Tables already there are left alone, so a role without CREATE (SELECT,
// INSERT and UPDATE on the tables, USAGE on the sequence) can feed.
func (s *Store) Init(ctx context.Context) error {
	var exist bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('toolgate_audit_entries') IS NOT NULL
		AND to_regclass('toolgate_audit_positions') IS NOT NULL`).Scan(&exist); err != nil || exist {
		return err
	}
	_, err := s.pool.Exec(ctx, schema)
	return err
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// SecretTool is the tool a host secret's tools list names to be usable in
// the DSN (with agent "*"): a database password is granted on purpose.
const SecretTool = "audit.postgres"

// ExpandDSN fills the {{secret:NAME}} references of a configured DSN from
// the host secrets. Errors name secrets, never values.
func ExpandDSN(dsn string, store *secrets.Store) (string, error) {
	out, err := secrets.Expand(dsn, func(name string) (string, error) { return store.Resolve("*", SecretTool, name) })
	if err != nil {
		return "", fmt.Errorf("gateway.audit.postgres.dsn: %w", err)
	}
	return out, nil
}

// Redact shows a DSN without its password, for logs and errors.
func Redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	var out []string
	for _, f := range strings.Fields(dsn) {
		if k, _, ok := strings.Cut(f, "="); ok && k == "password" {
			f = "password=xxxxx"
		}
		out = append(out, f)
	}
	return strings.Join(out, " ")
}

// Position is how far gateway's chain has arrived, and its last seq.
func (s *Store) Position(ctx context.Context, gatewayID string) (audit.Position, int64, error) {
	var pos audit.Position
	var seq int64
	err := s.pool.QueryRow(ctx, "SELECT file_offset, hash, seq FROM toolgate_audit_positions WHERE gateway_id = $1",
		gatewayID).Scan(&pos.Offset, &pos.Hash, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return audit.Position{}, 0, nil
	}
	return pos, seq, err
}

// batch bounds a transaction: the position is saved with every batch.
const batch = 2000

// ErrMoved is a feed that found the saved position changed under it:
// another process fed the same gateway. Feeding again resumes from there.
var ErrMoved = errors.New("audit postgres: the gateway's position moved (another feeder?)")

// CatchUp copies every entry of the log in dir written after the position
// saved for gatewayID, and returns how many. A position no longer in the
// files (the log was replaced or pruned) restarts from the first file:
// rows already present are skipped by their chain hash.
func (s *Store) CatchUp(ctx context.Context, dir, gatewayID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos, seq, err := s.Position(ctx, gatewayID)
	if err != nil {
		return 0, err
	}
	n, err := s.feed(ctx, dir, gatewayID, pos, seq)
	if errors.Is(err, audit.ErrPositionNotFound) {
		s.log.Warn("audit postgres: the saved position is not in the log; copying it again from its first file (known entries are skipped)",
			"gateway", gatewayID, "dir", dir)
		n, err = s.feed(ctx, dir, gatewayID, audit.Position{}, 0)
	}
	if err == nil {
		if p, _, perr := s.Position(ctx, gatewayID); perr == nil {
			s.progress.Reached(p)
		}
	}
	return n, err
}

// columns are a batch of entries, column by column: one unnest insert.
type columns struct {
	hash, id, phase, agent, typ, tool, decision, rule, session, parent, args, line []string
	seq                                                                            []int64
	ts                                                                             []time.Time
}

func (c *columns) add(e *gateway.Entry, line []byte, seq int64) {
	c.hash, c.id, c.phase, c.agent = append(c.hash, e.Hash), append(c.id, e.ID), append(c.phase, e.Phase), append(c.agent, e.Agent)
	c.typ, c.tool, c.decision = append(c.typ, string(e.Type)), append(c.tool, e.Tool), append(c.decision, e.Decision)
	c.rule, c.session, c.parent = append(c.rule, e.Rule), append(c.session, e.Session), append(c.parent, e.Parent)
	c.args, c.line = append(c.args, string(e.Args)), append(c.line, string(line))
	c.seq, c.ts = append(c.seq, seq), append(c.ts, e.TS)
}

func (c *columns) len() int { return len(c.seq) }

const insert = `INSERT INTO toolgate_audit_entries
	(gateway_id, hash, seq, ts, id, phase, agent, type, tool, decision, rule, session, parent, args, line)
SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[],
	$9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[])
ON CONFLICT (gateway_id, hash) DO NOTHING`

func (s *Store) feed(ctx context.Context, dir, gatewayID string, pos audit.Position, seq int64) (int, error) {
	var c columns
	n, from, last := 0, pos, pos
	flush := func() error {
		if c.len() == 0 {
			return nil
		}
		if err := s.commit(ctx, gatewayID, from, last, seq, &c); err != nil {
			return err
		}
		n += c.len()
		c, from = columns{}, last
		return nil
	}
	err := audit.ScanLinesAfter(dir, pos, func(e *gateway.Entry, line []byte, end audit.Position) error {
		seq++
		c.add(e, line, seq)
		last = end
		if c.len() >= batch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, flush()
}

// commit writes c and moves the position from → to in one transaction.
// The move is a compare-and-swap on the old position, so two feeders of one
// gateway cannot both advance it.
func (s *Store) commit(ctx context.Context, gatewayID string, from, to audit.Position, seq int64, c *columns) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, insert, gatewayID, c.hash, c.seq, c.ts, c.id, c.phase, c.agent, c.typ, c.tool,
		c.decision, c.rule, c.session, c.parent, c.args, c.line); err != nil {
		return err
	}
	var tag pgconn.CommandTag
	if from == (audit.Position{}) {
		tag, err = tx.Exec(ctx, `INSERT INTO toolgate_audit_positions(gateway_id, file_offset, hash, seq) VALUES($1, $2, $3, $4)
			ON CONFLICT (gateway_id) DO UPDATE SET file_offset = $2, hash = $3, seq = $4, updated_at = now()`,
			gatewayID, to.Offset, to.Hash, seq)
	} else {
		tag, err = tx.Exec(ctx, `UPDATE toolgate_audit_positions SET file_offset = $2, hash = $3, seq = $4, updated_at = now()
			WHERE gateway_id = $1 AND file_offset = $5 AND hash = $6`, gatewayID, to.Offset, to.Hash, seq, from.Offset, from.Hash)
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return ErrMoved
	}
	return tx.Commit(ctx)
}

// Lag is how long the copy has been behind a log whose last durable line
// is at head (see audit.Progress).
func (s *Store) Lag(head audit.Position) time.Duration { return s.progress.Lag(head) }

// Follow keeps gatewayID's rows caught up with the log in dir until ctx
// ends (audit.Follow): every poll, and at once when kick receives. While
// the database is unreachable it logs once per outage and retries with a
// growing backoff.
func (s *Store) Follow(ctx context.Context, dir, gatewayID string, every time.Duration, kick <-chan struct{}) {
	ready := false
	audit.Follow(ctx, audit.FollowOptions{What: "audit postgres copy", Log: s.log.With("gateway", gatewayID), Every: every, Kick: kick,
		Step: func(ctx context.Context) error {
			if !ready {
				if err := s.Init(ctx); err != nil {
					return err
				}
				ready = true
			}
			_, err := s.CatchUp(ctx, dir, gatewayID)
			return err
		}})
}
