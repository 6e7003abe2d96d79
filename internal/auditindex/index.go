// Package auditindex is a query index beside the audit log: an embedded
// SQLite database (modernc.org/sqlite, no cgo) fed from the JSON-lines
// files, which stay the source of truth. The index follows the files — it
// is never on a call's path — so a missing, lagging or corrupt index never
// blocks a call or loses an entry: it is caught up, or rebuilt from the
// files.
package auditindex

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auditquery"
	"github.com/toolgate/toolgate/internal/gateway"
)

// File is the index's name inside the audit directory.
const File = "index.sqlite"

// schemaVersion changes when the schema does: an older index is rebuilt.
const schemaVersion = "2"

const schema = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
	seq      INTEGER PRIMARY KEY,  -- position in the chain, from 1
	ts       INTEGER NOT NULL,     -- unix nanoseconds
	id       TEXT NOT NULL,
	phase    TEXT NOT NULL,
	agent    TEXT NOT NULL,
	type     TEXT NOT NULL,
	tool     TEXT NOT NULL,
	decision TEXT NOT NULL,
	rule     TEXT NOT NULL,
	session  TEXT NOT NULL,
	parent   TEXT NOT NULL
);
-- The lines as written, apart: filtering reads only the narrow table.
CREATE TABLE IF NOT EXISTS lines (seq INTEGER PRIMARY KEY, line TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entries_id ON entries(id);
CREATE INDEX IF NOT EXISTS entries_ts ON entries(ts);
CREATE INDEX IF NOT EXISTS entries_agent ON entries(agent, seq);
CREATE INDEX IF NOT EXISTS entries_tool ON entries(tool, seq);
CREATE INDEX IF NOT EXISTS entries_decision ON entries(decision, agent, tool, seq);
CREATE INDEX IF NOT EXISTS entries_rule ON entries(rule, seq);
CREATE INDEX IF NOT EXISTS entries_session ON entries(session) WHERE session != '';
CREATE INDEX IF NOT EXISTS entries_parent ON entries(parent) WHERE parent != '';
CREATE VIRTUAL TABLE IF NOT EXISTS argtext USING fts5(args, content='', contentless_delete=1);
`

// The index's questions and answers are auditquery's; the names stay here
// for the packages that ask the index.
type (
	Query = auditquery.Query
	Hit   = auditquery.Hit
)

// MaxLimit bounds one page of results.
const MaxLimit = auditquery.MaxLimit

// ErrBadQuery is a query the index refuses.
var ErrBadQuery = auditquery.ErrBadQuery

// Index is an open index. Safe for concurrent use.
type Index struct {
	progress audit.Progress // the last catch-up
	db       *sql.DB
	dir      string
	log      *slog.Logger
	mu       sync.Mutex // one catch-up at a time
	path     string
}

// Open opens (or creates) the index of the audit log in dir. An index that
// is unreadable, corrupt or of another schema is removed and created anew;
// CatchUp then fills it from the files.
func Open(dir string, log *slog.Logger) (*Index, error) {
	if log == nil {
		log = slog.Default()
	}
	x := &Index{dir: dir, log: log, path: filepath.Join(dir, File)}
	err := x.open()
	if err != nil {
		log.Warn("audit index unusable; rebuilding it from the log", "path", x.path, "err", err)
		x.close()
		if err := removeDB(x.path); err != nil {
			return nil, err
		}
		if err := x.open(); err != nil {
			x.close()
			return nil, fmt.Errorf("audit index: %w", err)
		}
	}
	return x, nil
}

func (x *Index) open() error {
	db, err := sql.Open("sqlite", "file:"+x.path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return err
	}
	x.db = db
	var check string
	if err := db.QueryRow("PRAGMA quick_check").Scan(&check); err != nil {
		return err
	}
	if check != "ok" {
		return fmt.Errorf("integrity check: %s", check)
	}
	if _, err := db.Exec(schema); err != nil {
		return err
	}
	v, err := x.meta("schema")
	if err != nil {
		return err
	}
	switch v {
	case schemaVersion:
	case "":
		return x.setMeta(db, "schema", schemaVersion)
	default:
		return fmt.Errorf("schema version %s, want %s", v, schemaVersion)
	}
	return nil
}

func (x *Index) close() {
	if x.db != nil {
		_ = x.db.Close()
		x.db = nil
	}
}

// Close closes the database.
func (x *Index) Close() error {
	if x.db == nil {
		return nil
	}
	return x.db.Close()
}

func removeDB(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit index: %w", err)
		}
	}
	return nil
}

type execer interface {
	Exec(query string, args ...any) (sql.Result, error)
}

func (x *Index) meta(key string) (string, error) {
	var v string
	err := x.db.QueryRow("SELECT value FROM meta WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func (x *Index) setMeta(db execer, key, value string) error {
	_, err := db.Exec("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value)
	return err
}

// Position is how far the index has read the log.
func (x *Index) Position() (audit.Position, int64, error) {
	var pos audit.Position
	off, err := x.meta("offset")
	if err != nil {
		return pos, 0, err
	}
	if off != "" {
		if _, err := fmt.Sscan(off, &pos.Offset); err != nil {
			return pos, 0, fmt.Errorf("audit index: offset %q", off)
		}
	}
	if pos.Hash, err = x.meta("hash"); err != nil {
		return pos, 0, err
	}
	var seq sql.NullInt64
	if err := x.db.QueryRow("SELECT max(seq) FROM entries").Scan(&seq); err != nil {
		return pos, 0, err
	}
	return pos, seq.Int64, nil
}

// batch bounds a transaction: progress is saved at least this often.
const batch = 5000

// CatchUp indexes every entry written after the index's position and
// returns how many. When the position is no longer in the log (files
// removed, a log from elsewhere), the index is rebuilt from the files.
func (x *Index) CatchUp() (int, error) { return x.catchUp(false) }

// catchUp is CatchUp, paced (see pace) when paced is set.
func (x *Index) catchUp(paced bool) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	pos, seq, err := x.Position()
	if err != nil {
		return 0, err
	}
	n, err := x.feed(pos, seq, paced)
	if err == nil {
		x.noteCaught()
	}
	if errors.Is(err, audit.ErrPositionNotFound) {
		x.log.Warn("audit index does not match the log; rebuilding it", "dir", x.dir)
		if err := x.reset(); err != nil {
			return 0, err
		}
		return x.feed(audit.Position{}, 0, paced)
	}
	return n, err
}

// A paced catch-up — Follow's, in the background of a serving gateway —
// pauses for paceFor after every paceEvery entries. Indexing an entry is
// ~30 µs of CPU (its JSON, three SQLite inserts, the argument text's
// full-text terms), so a catch-up under load was 300-400 entries in one
// burst of 7-33 ms every poll, and on a small machine the calls in flight
// then waited for a CPU (issue 13: plugin calls' p99). Paced, it holds a
// CPU ~1 ms at a time and keeps up with well over 10k entries/s.
const (
	paceEvery = 32
	paceFor   = time.Millisecond
)

func (x *Index) noteCaught() {
	if pos, _, err := x.Position(); err == nil {
		x.progress.Reached(pos)
	}
}

// Lag is how long the index has been behind a log whose last durable line
// is at head (see audit.Progress).
func (x *Index) Lag(head audit.Position) time.Duration { return x.progress.Lag(head) }

// Rebuild empties the index and indexes the whole log again.
func (x *Index) Rebuild() (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.reset(); err != nil {
		return 0, err
	}
	return x.feed(audit.Position{}, 0, false)
}

func (x *Index) reset() error {
	_, err := x.db.Exec("DELETE FROM entries; DELETE FROM lines; DELETE FROM argtext; DELETE FROM meta WHERE key IN ('offset', 'hash')")
	return err
}

func (x *Index) feed(pos audit.Position, seq int64, paced bool) (int, error) {
	tx, err := x.db.Begin()
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var ins, insLine, insArgs *sql.Stmt
	prepare := func() error {
		var err error
		if ins, err = tx.Prepare(`INSERT INTO entries(seq, ts, id, phase, agent, type, tool, decision, rule, session, parent)
			VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
			return err
		}
		if insLine, err = tx.Prepare("INSERT INTO lines(seq, line) VALUES(?, ?)"); err != nil {
			return err
		}
		insArgs, err = tx.Prepare("INSERT INTO argtext(rowid, args) VALUES(?, ?)")
		return err
	}
	if err := prepare(); err != nil {
		return 0, err
	}
	n, pending := 0, 0
	var last audit.Position
	commit := func() error {
		if pending == 0 {
			return nil
		}
		if err := x.setMeta(tx, "offset", fmt.Sprint(last.Offset)); err != nil {
			return err
		}
		if err := x.setMeta(tx, "hash", last.Hash); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		pending = 0
		if tx, err = x.db.Begin(); err != nil {
			return err
		}
		return prepare()
	}
	err = audit.ScanLinesAfter(x.dir, pos, func(e *gateway.Entry, line []byte, end audit.Position) error {
		seq++
		if _, err := ins.Exec(seq, e.TS.UnixNano(), e.ID, e.Phase, e.Agent, string(e.Type), e.Tool, e.Decision,
			e.Rule, e.Session, e.Parent); err != nil {
			return err
		}
		if _, err := insLine.Exec(seq, string(line)); err != nil {
			return err
		}
		if len(e.Args) > 0 {
			if _, err := insArgs.Exec(seq, string(e.Args)); err != nil {
				return err
			}
		}
		n++
		pending++
		last = end
		if paced && n%paceEvery == 0 {
			time.Sleep(paceFor)
		}
		if pending >= batch {
			return commit()
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	if err := commit(); err != nil {
		return n, err
	}
	if n >= analyzeAfter {
		// Statistics let the planner pick the id index for show and the
		// composite ones for filters, instead of walking the chain.
		_, err = x.db.Exec("ANALYZE")
	}
	return n, err
}

// analyzeAfter is how many new entries make a catch-up refresh the
// planner's statistics.
const analyzeAfter = 10_000

// Follow keeps the index caught up until ctx ends: after every poll, and
// at once when kick receives. Errors are logged and retried; an index that
// cannot be written is reopened (rebuilt) rather than left behind.
func (x *Index) Follow(ctx context.Context, every time.Duration, kick <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := os.Stat(x.path); errors.Is(err, os.ErrNotExist) {
			// Deleted under us: the open handle writes to a file no one
			// else can see. Start a new one from the log.
			x.log.Warn("audit index removed; rebuilding it from the log", "path", x.path)
			x.recover()
		}
		if _, err := x.catchUp(true); err != nil && ctx.Err() == nil {
			x.log.Warn("audit index catch-up failed; retrying", "err", err)
			if strings.Contains(err.Error(), "malformed") || strings.Contains(err.Error(), "corrupt") || strings.Contains(err.Error(), "no such table") {
				x.recover()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}

// recover replaces a database that went bad under a running daemon.
func (x *Index) recover() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.close()
	if err := removeDB(x.path); err != nil {
		x.log.Error("audit index: removing a corrupt index", "err", err)
	}
	if err := x.open(); err != nil {
		x.log.Error("audit index: reopening", "err", err)
	}
}
