// Package auditindex is a query index beside the audit log: an embedded
// SQLite database (modernc.org/sqlite, no cgo) fed from the JSON-lines
// files, which stay the source of truth. The index follows the files — it
// is never on a call's path — so a missing, lagging or corrupt index never
// blocks a call or loses an entry: it is caught up, or rebuilt from the
// files.
//
// One process at a time has the index open, and it is the index's one
// writer: it holds the lock File+".lock" (writer.go). A running gateway
// holds it for as long as it serves and answers the CLI's queries over its
// admin API; a command opens the index itself only when no gateway runs.
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
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/lib/pidlock"
	"github.com/toolgate/toolgate/internal/proto/auditquery"
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

// ErrSessionAgents is a session asked for without its agent when several
// agents' entries name it.
var ErrSessionAgents = auditquery.ErrSessionAgents

// ErrUnavailable is an index this process does not have open: another
// process holds the writer's lock, or it could not be opened.
var ErrUnavailable = errors.New("the audit index is not open")

// Index is the index of one audit directory. Safe for concurrent use.
type Index struct {
	dir, path string
	log       *slog.Logger
	progress  audit.Progress // the last catch-up

	// mu is held by whatever writes: a catch-up, the end of a rebuild,
	// opening and closing. db changes only under mu and dbMu both, so a
	// writer reads it freely.
	mu sync.Mutex
	// dbMu: readers hold it shared while they use db.
	dbMu sync.RWMutex
	db   *sql.DB
	lock *pidlock.Lock // the writer's lock, held while db is open
	// heldBy is the pid holding the lock when this process last tried it.
	heldBy atomic.Int64
	// rebuilds: one Rebuild at a time.
	rebuilds sync.Mutex
	// hurry counts callers waiting to catch up; a paced catch-up does not
	// pause while there are any (see pace).
	hurry atomic.Int32
	// paced: this index follows the log in a serving gateway (Follow), so
	// its background work is paced.
	paced atomic.Bool
	// head, when set, is where the log's writer in this process is.
	head func() audit.Position
}

// New returns the index of the audit log in dir, not open yet: Follow opens
// it once this process can hold the writer's lock. head, when set, is the
// end of the log's last durable line as its writer in this process knows it
// (audit.Writer.Position): a CatchUp that finds the index there has
// nothing to read, and returns at once.
func New(dir string, log *slog.Logger, head func() audit.Position) *Index {
	if log == nil {
		log = slog.Default()
	}
	return &Index{dir: dir, log: log, path: filepath.Join(dir, File), head: head}
}

// Open opens (or creates) the index of the audit log in dir for a command
// that runs without a gateway, taking the writer's lock: another holder is
// a *pidlock.HeldError. The integrity of the database is checked when the
// lock's previous holder did not end cleanly; an index that is unreadable,
// corrupt or of another schema is made anew (CatchUp then fills it).
func Open(dir string, log *slog.Logger) (*Index, error) {
	x := New(dir, log, nil)
	x.mu.Lock()
	defer x.mu.Unlock()
	lock, err := x.takeLock()
	if err != nil {
		return nil, err
	}
	if err := x.openLocked(lock.Crashed()); err != nil {
		x.releaseLock()
		return nil, err
	}
	return x, nil
}

// takeLock takes the writer's lock and removes what a rebuild cut short
// left behind. Called with mu held.
func (x *Index) takeLock() (*pidlock.Lock, error) {
	lock, err := pidlock.Take(x.path + ".lock")
	var held *pidlock.HeldError
	if errors.As(err, &held) {
		x.heldBy.Store(int64(held.PID))
		return nil, fmt.Errorf("the audit index is being written by %s (a running gateway, or an audit command): %w", held.Holder(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("audit index: %w", err)
	}
	x.heldBy.Store(0)
	x.lock = lock
	if leftovers, _ := filepath.Glob(x.path + ".new-*"); len(leftovers) > 0 {
		for _, p := range leftovers {
			if err := removeDB(p); err != nil {
				x.log.Warn("audit index: removing an unfinished rebuild", "err", err)
			}
		}
	}
	return lock, nil
}

func (x *Index) releaseLock() {
	if x.lock != nil {
		_ = x.lock.Release()
		x.lock = nil
	}
}

// openLocked opens the database at x.path, checking it first when check
// is set; one that cannot be used is removed and made anew. Called with
// mu held and the writer's lock taken.
func (x *Index) openLocked(check bool) error {
	db, err := openDB(x.path, check)
	if err != nil {
		x.log.Warn("audit index unusable; rebuilding it from the log", "path", x.path, "err", err)
		if err := removeDB(x.path); err != nil {
			return err
		}
		if db, err = openDB(x.path, false); err != nil {
			return fmt.Errorf("audit index: %w", err)
		}
	}
	x.setDB(db)
	return nil
}

func (x *Index) setDB(db *sql.DB) {
	x.dbMu.Lock()
	defer x.dbMu.Unlock()
	if x.db != nil {
		_ = x.db.Close()
	}
	x.db = db
}

// openDB opens the database at path with the index's schema. Every write
// transaction begins IMMEDIATE: it holds SQLite's write lock from its first
// statement, so the position it reads is the one it advances.
func openDB(path string, check bool) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	if err := initDB(db, check); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func initDB(db *sql.DB, check bool) error {
	if check {
		if err := quickCheck(db); err != nil {
			return err
		}
	}
	if _, err := db.Exec(schema); err != nil {
		return err
	}
	v, err := meta(db, "schema")
	if err != nil {
		return err
	}
	switch v {
	case schemaVersion:
	case "":
		return setMeta(db, "schema", schemaVersion)
	default:
		return fmt.Errorf("schema version %s, want %s", v, schemaVersion)
	}
	return nil
}

// quickCheck is SQLite's quick_check: ~0.35 s at 200k entries, so it runs
// where damage can have happened — at a gateway's start, after a holder of
// the index ended without closing it — not before every query.
func quickCheck(db *sql.DB) error {
	var check string
	if err := db.QueryRow("PRAGMA quick_check").Scan(&check); err != nil {
		return err
	}
	if check != "ok" {
		return fmt.Errorf("integrity check: %s", check)
	}
	return nil
}

// Close closes the database and lets the writer's lock go.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dbMu.Lock()
	defer x.dbMu.Unlock()
	var err error
	if x.db != nil {
		err = x.db.Close()
		x.db = nil
	}
	x.releaseLock()
	return err
}

// reader returns the database for a query; done must be called after it.
func (x *Index) reader() (db *sql.DB, done func(), err error) {
	x.dbMu.RLock()
	if x.db == nil {
		x.dbMu.RUnlock()
		if pid := x.heldBy.Load(); pid != 0 {
			return nil, nil, fmt.Errorf("%w: pid %d is writing it; this process follows it once that ends", ErrUnavailable, pid)
		}
		return nil, nil, ErrUnavailable
	}
	return x.db, x.dbMu.RUnlock, nil
}

func removeDB(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit index: %w", err)
		}
	}
	return nil
}

type querier interface {
	Exec(query string, args ...any) (sql.Result, error)
	QueryRow(query string, args ...any) *sql.Row
}

func meta(db querier, key string) (string, error) {
	var v string
	err := db.QueryRow("SELECT value FROM meta WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func setMeta(db querier, key, value string) error {
	_, err := db.Exec("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value)
	return err
}

// position is how far the index in db has read the log, and its last seq.
func position(db querier) (audit.Position, int64, error) {
	var pos audit.Position
	off, err := meta(db, "offset")
	if err != nil {
		return pos, 0, err
	}
	if off != "" {
		if _, err := fmt.Sscan(off, &pos.Offset); err != nil {
			return pos, 0, fmt.Errorf("audit index: offset %q", off)
		}
	}
	if pos.Hash, err = meta(db, "hash"); err != nil {
		return pos, 0, err
	}
	var seq sql.NullInt64
	if err := db.QueryRow("SELECT max(seq) FROM entries").Scan(&seq); err != nil {
		return pos, 0, err
	}
	return pos, seq.Int64, nil
}

// Position is how far the index has read the log, and its last seq.
func (x *Index) Position() (audit.Position, int64, error) {
	db, done, err := x.reader()
	if err != nil {
		return audit.Position{}, 0, err
	}
	defer done()
	return position(db)
}

// batch bounds a transaction: progress is saved at least this often.
const batch = 5000

// ErrMoved is a catch-up that found the saved position changed under it:
// something else wrote the index. Catching up again resumes from there.
var ErrMoved = errors.New("audit index: the position moved (another writer?)")

// CatchUp indexes every entry written after the index's position and
// returns how many. When the position is no longer in the log (files
// removed, a log from elsewhere), or the database is damaged, the index is
// rebuilt from the files. A paced catch-up in progress (Follow's) goes on
// at full speed while a CatchUp waits for it.
func (x *Index) CatchUp() (int, error) {
	if x.head != nil && x.progress.Lag(x.head()) == 0 {
		return 0, nil
	}
	x.hurry.Add(1)
	defer x.hurry.Add(-1)
	return x.catchUp(context.Background(), false)
}

// catchUp is CatchUp, paced (see pace) when paced is set, until ctx ends.
func (x *Index) catchUp(ctx context.Context, paced bool) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.db == nil {
		_, _, err := x.reader()
		return 0, err
	}
	n, err := x.feed(ctx, x.db, paced)
	switch {
	case err == nil:
		x.noteCaught()
	case errors.Is(err, audit.ErrPositionNotFound):
		x.log.Warn("audit index does not match the log; rebuilding it", "dir", x.dir)
		return x.rebuildLocked(ctx, paced)
	case damaged(err):
		x.log.Warn("audit index damaged; rebuilding it from the log", "path", x.path, "err", err)
		return x.rebuildLocked(ctx, paced)
	}
	return n, err
}

// damaged tells a database SQLite cannot read from a query that failed.
func damaged(err error) bool {
	s := err.Error()
	return strings.Contains(s, "malformed") || strings.Contains(s, "corrupt") || strings.Contains(s, "no such table")
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
	if pos, _, err := position(x.db); err == nil {
		x.progress.Reached(pos)
	}
}

// Lag is how long the index has been behind a log whose last durable line
// is at head (see audit.Progress).
func (x *Index) Lag(head audit.Position) time.Duration { return x.progress.Lag(head) }

// feed indexes into db every entry after the position db holds, in
// transactions of at most batch entries. Each transaction reads the
// position it starts from inside itself (IMMEDIATE: under SQLite's write
// lock), so two feeds of one file can never both write the entries after
// one position: the second finds the position moved (ErrMoved). A feed
// stops when ctx ends, keeping what it committed.
func (x *Index) feed(ctx context.Context, db *sql.DB, paced bool) (int, error) {
	var tx *sql.Tx
	defer func() {
		if tx != nil {
			_ = tx.Rollback()
		}
	}()
	var ins, insLine, insArgs *sql.Stmt
	// begin starts a transaction that goes on from want: the position it
	// reads inside itself, unless something else moved it.
	begin := func(want *audit.Position) (audit.Position, int64, error) {
		var err error
		if tx, err = db.Begin(); err != nil {
			return audit.Position{}, 0, err
		}
		pos, seq, err := position(tx)
		if err != nil {
			return pos, seq, err
		}
		if want != nil && pos != *want {
			return pos, seq, ErrMoved
		}
		if ins, err = tx.Prepare(`INSERT INTO entries(seq, ts, id, phase, agent, type, tool, decision, rule, session, parent)
			VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
			return pos, seq, err
		}
		if insLine, err = tx.Prepare("INSERT INTO lines(seq, line) VALUES(?, ?)"); err != nil {
			return pos, seq, err
		}
		insArgs, err = tx.Prepare("INSERT INTO argtext(rowid, args) VALUES(?, ?)")
		return pos, seq, err
	}
	pos, seq, err := begin(nil)
	if err != nil {
		return 0, err
	}
	n, pending := 0, 0
	last := pos
	commit := func() error {
		if pending == 0 {
			return nil
		}
		if err := setMeta(tx, "offset", fmt.Sprint(last.Offset)); err != nil {
			return err
		}
		if err := setMeta(tx, "hash", last.Hash); err != nil {
			return err
		}
		err := tx.Commit()
		tx, pending = nil, 0
		return err
	}
	err = audit.ScanLinesAfter(x.dir, pos, func(e *gateway.Entry, line []byte, end audit.Position) error {
		if tx == nil {
			if _, _, err := begin(&last); err != nil {
				return err
			}
		}
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
		if n%paceEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if paced && x.hurry.Load() == 0 {
				time.Sleep(paceFor)
			}
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
		_, err = db.Exec("ANALYZE")
	}
	return n, err
}

// analyzeAfter is how many new entries make a catch-up refresh the
// planner's statistics.
const analyzeAfter = 10_000

// Follow opens the index once this process holds the writer's lock
// (checking the database first: a gateway's start is where damage from a
// crash shows), then keeps it caught up until ctx ends: after every poll,
// and at once when kick receives (audit.Follow). Its work is paced. An
// index that cannot be written is rebuilt rather than left behind.
func (x *Index) Follow(ctx context.Context, every time.Duration, kick <-chan struct{}) {
	x.paced.Store(true)
	waiting := false
	audit.Follow(ctx, audit.FollowOptions{What: "audit index", Log: x.log, Every: every, Kick: kick,
		Step: func(ctx context.Context) error {
			if !x.follow(ctx, &waiting) {
				return nil // waiting for the lock, or logged
			}
			_, err := x.catchUp(ctx, true)
			return err
		}})
}

// follow opens the index when this process does not have it open yet, and
// rebuilds it when its file was deleted; it reports whether it is open.
func (x *Index) follow(ctx context.Context, waiting *bool) bool {
	x.mu.Lock()
	opened := false
	if x.db == nil {
		if x.lock == nil {
			if _, err := x.takeLock(); err != nil {
				if !*waiting {
					x.log.Warn("audit index: waiting for its writer to finish; queries answer once it has", "err", err)
					*waiting = true
				}
				x.mu.Unlock()
				return false
			}
		}
		if err := x.openLocked(false); err != nil {
			x.log.Error("audit index: opening", "err", err)
			x.mu.Unlock()
			return false
		}
		opened, *waiting = true, false
	}
	x.mu.Unlock()
	if opened {
		x.check(ctx)
	}
	if _, err := os.Stat(x.path); errors.Is(err, os.ErrNotExist) {
		// Deleted under us: the open handle reads and writes a file no
		// one else can see. It answers until its replacement is built.
		x.log.Warn("audit index removed; rebuilding it from the log", "path", x.path)
		if _, err := x.rebuild(ctx, true); err != nil && ctx.Err() == nil {
			x.log.Error("audit index: rebuilding", "err", err)
		}
	}
	return true
}

// check runs the integrity check on the open index (which answers
// meanwhile) and rebuilds it when damaged.
func (x *Index) check(ctx context.Context) {
	db, done, err := x.reader()
	if err != nil {
		return
	}
	err = quickCheck(db)
	done()
	if err != nil {
		x.log.Warn("audit index damaged; rebuilding it from the log", "path", x.path, "err", err)
		x.mu.Lock()
		defer x.mu.Unlock()
		if _, err := x.rebuildLocked(ctx, x.paced.Load()); err != nil && ctx.Err() == nil {
			x.log.Error("audit index: rebuilding", "err", err)
		}
	}
}
