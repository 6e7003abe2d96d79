package auditindex

import (
	"context"
	"database/sql"
	"fmt"
	"os"
)

// Rebuild indexes the whole log again into a new database beside the one in
// use, which answers meanwhile, then puts it in its place at once: a query
// sees the old index or the new, never one half built. It returns how many
// entries the new index holds. A rebuild stops when ctx ends, leaving the
// index as it was.
func (x *Index) Rebuild(ctx context.Context) (int, error) { return x.rebuild(ctx, false) }

// rebuild is Rebuild; when missing is set, only if the index's file is
// (still) missing once rebuilds before it have ended.
func (x *Index) rebuild(ctx context.Context, missing bool) (int, error) {
	x.rebuilds.Lock()
	defer x.rebuilds.Unlock()
	if _, err := os.Stat(x.path); missing && err == nil {
		return 0, nil
	}
	x.mu.Lock()
	held := x.lock != nil
	x.mu.Unlock()
	if !held {
		_, _, err := x.reader()
		return 0, err
	}
	paced := x.paced.Load()
	tmp, db, n, err := x.build(ctx, paced)
	if err != nil {
		return 0, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	m, err := x.swap(ctx, tmp, db, paced)
	return n + m, err
}

// rebuildLocked is Rebuild for a writer holding mu, whose index is of no
// use meanwhile (damaged, or not the log's).
func (x *Index) rebuildLocked(ctx context.Context, paced bool) (int, error) {
	tmp, db, n, err := x.build(ctx, paced)
	if err != nil {
		return 0, err
	}
	m, err := x.swap(ctx, tmp, db, paced)
	return n + m, err
}

// build indexes the log into a new database file beside the index.
func (x *Index) build(ctx context.Context, paced bool) (string, *sql.DB, int, error) {
	f, err := os.CreateTemp(x.dir, File+".new-*")
	if err != nil {
		return "", nil, 0, fmt.Errorf("audit index: %w", err)
	}
	tmp := f.Name()
	f.Close()
	db, err := openDB(tmp, false)
	if err == nil {
		var n int
		if n, err = x.feed(ctx, db, paced); err == nil {
			return tmp, db, n, nil
		}
		db.Close()
	}
	_ = removeDB(tmp)
	return "", nil, 0, fmt.Errorf("audit index: rebuilding: %w", err)
}

// swap catches the new database db (at tmp) up with what the log got
// while it was built, then puts it in the index's place. Called with mu
// held, so nothing else writes meanwhile; readers wait only for the rename.
func (x *Index) swap(ctx context.Context, tmp string, db *sql.DB, paced bool) (int, error) {
	n, err := x.feed(ctx, db, paced)
	if err == nil {
		// Everything into the file itself, none of it left in a journal
		// that would not follow the rename.
		_, err = db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = removeDB(tmp)
		return n, fmt.Errorf("audit index: rebuilding: %w", err)
	}
	x.dbMu.Lock()
	defer x.dbMu.Unlock()
	if x.db != nil {
		_ = x.db.Close()
		x.db = nil
	}
	// The old database's journal must not be read as the new one's. Only
	// this process has it open (it holds the writer's lock), and closing
	// it checkpointed it, so nothing in it is lost.
	for _, p := range []string{x.path + "-wal", x.path + "-shm", x.path + "-journal"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return n, fmt.Errorf("audit index: %w", err)
		}
	}
	if err := os.Rename(tmp, x.path); err != nil {
		return n, fmt.Errorf("audit index: %w", err)
	}
	if d, err := os.Open(x.dir); err == nil {
		_ = d.Sync() // the rename outlives a crash
		d.Close()
	}
	if x.db, err = openDB(x.path, false); err != nil {
		return n, fmt.Errorf("audit index: %w", err)
	}
	if pos, _, err := position(x.db); err == nil {
		x.progress.Reached(pos)
	}
	return n, nil
}
