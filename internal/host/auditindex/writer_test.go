package auditindex

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/lib/pidlock"
	"github.com/toolgate/toolgate/internal/testenv/wait"
)

// TestOneWriter: while one Index has the index open, another cannot open
// it and is told who has it; a following Index waits, answering "not
// open" with the holder's pid, and takes the index over once it is let go.
func TestOneWriter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLog(t, dir, 20, 0)
	x := open(t, dir)
	_, err := Open(dir, nil)
	var held *pidlock.HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() {
		t.Fatalf("second Open: %v, want held by pid %d", err, os.Getpid())
	}

	y := New(dir, nil, nil)
	stop := follow(y, 10*time.Millisecond)
	defer func() { stop(); y.Close() }()
	wait.For(t, "the second follower to find the lock held", func() bool { return y.heldBy.Load() != 0 })
	if _, err := y.Find(Query{}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("query of a follower waiting for the lock: %v", err)
	}
	if _, err := y.CatchUp(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("catch-up of a follower waiting for the lock: %v", err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	waitCount(t, y, 20)
}

// TestFeedsOfOneFileDoNotOverlap: two writers of one index file (the lock
// bypassed, as two processes without it were) catching up at once while
// the log grows: neither fails but by finding the position moved, and the
// index holds every entry once at its place in the chain. With the
// position read before the transaction, both fed from the same point:
// "UNIQUE constraint failed: entries.seq", or the same entries twice.
func TestFeedsOfOneFileDoNotOverlap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLog(t, dir, 12_000, 0) // more than a batch: feeds commit midway
	var xs []*Index
	for range 2 {
		x := New(dir, nil, nil)
		db, err := openDB(x.path, false)
		if err != nil {
			t.Fatal(err)
		}
		x.setDB(db)
		t.Cleanup(func() { x.Close() })
		xs = append(xs, x)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for _, x := range xs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if _, err := x.CatchUp(); err != nil && !errors.Is(err, ErrMoved) {
					errs <- err
				}
			}
		}()
	}
	for range 5 {
		writeLog(t, dir, 500, 0)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := xs[0].CatchUp(); err != nil {
		t.Fatal(err)
	}
	sameAsLog(t, xs[0], dir)
}

// sameAsLog holds x to the log in dir: row n is the chain's entry n, as
// written, and there is no other.
func sameAsLog(t *testing.T, x *Index, dir string) {
	t.Helper()
	var lines []string
	if err := audit.ScanLinesAfter(dir, audit.Position{}, func(_ *gateway.Entry, line []byte, _ audit.Position) error {
		lines = append(lines, string(line))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n, err := x.Count()
	if err != nil || n != int64(len(lines)) {
		t.Fatalf("%d rows (%v) for %d lines", n, err, len(lines))
	}
	q := Query{Limit: MaxLimit}
	for {
		hits, err := x.Find(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if string(h.Line) != lines[h.Seq-1] {
				t.Fatalf("row %d is not the chain's entry %d", h.Seq, h.Seq)
			}
		}
		if len(hits) < q.Limit {
			return
		}
		q.After = hits[len(hits)-1].Seq
	}
}

// TestRebuildSwapsWhole: a rebuild of a following index while the log
// grows and readers query: no reader ever sees fewer entries than before
// (the old index answers until the new one takes its place at once), and
// the rebuilt index is the log, line by line.
func TestRebuildSwapsWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLog(t, dir, 6_000, 0)
	x := open(t, dir)
	stopFollowing := follow(x, 5*time.Millisecond)
	waitCount(t, x, 6_000)

	stop := make(chan struct{})
	var readers sync.WaitGroup
	errs := make(chan error, 10)
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var seen int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := x.Count()
				if err == nil && n < seen {
					err = errors.New("the index shrank from " + strconv.FormatInt(seen, 10) + " to " + strconv.FormatInt(n, 10) + " entries")
				}
				if err != nil {
					errs <- err
					return
				}
				seen = n
			}
		}()
	}
	rebuilt := make(chan error)
	go func() {
		var err error
		for range 2 {
			if _, err = x.Rebuild(context.Background()); err != nil {
				break
			}
		}
		rebuilt <- err
	}()
	writeLog(t, dir, 300, 0)
	if err := <-rebuilt; err != nil {
		t.Fatal(err)
	}
	close(stop)
	readers.Wait()
	stopFollowing()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, File+".new-*")); len(leftovers) > 0 {
		t.Errorf("rebuilds left %v", leftovers)
	}
	if _, err := x.CatchUp(); err != nil {
		t.Fatal(err)
	}
	sameAsLog(t, x, dir)
}

// TestDamageFoundAfterACrash: a holder that ended without closing the
// index (its pid still in the lock file) makes the next Open check it, and
// a damaged index is rebuilt; a gateway's follower checks at its start.
func TestDamageFoundAfterACrash(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"open after a crash", "follower's start"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			writeLog(t, dir, 3_000, 0)
			x := caughtUp(t, dir)
			x.Close()
			damage(t, filepath.Join(dir, File))
			if how == "open after a crash" {
				if err := os.WriteFile(filepath.Join(dir, File+".lock"), []byte("999999\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				y := open(t, dir)
				if _, err := y.CatchUp(); err != nil {
					t.Fatal(err)
				}
				sameAsLog(t, y, dir)
				return
			}
			y := New(dir, nil, nil)
			stop := follow(y, 10*time.Millisecond)
			defer func() { stop(); y.Close() }()
			waitCheck(t, y)
		})
	}
}

// waitCheck waits until x passes SQLite's integrity check and matches the log.
func waitCheck(t *testing.T, x *Index) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		db, done, err := x.reader()
		if err == nil {
			err = quickCheck(db)
			done()
		}
		if err == nil {
			x.mu.Lock()
			x.mu.Unlock() // a rebuild in progress has ended
			if _, err = x.CatchUp(); err == nil {
				sameAsLog(t, x, x.dir)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("index never whole again: %v", err)
		}
	}
}

// damage overwrites pages in the middle of a database file, leaving its
// header: SQLite opens it, and its integrity check fails.
func damage(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, 3*4096)
	for i := range junk {
		junk[i] = byte(i*31 + 7)
	}
	if _, err := f.WriteAt(junk, fi.Size()/2/4096*4096); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(path + "-wal")
	_ = os.Remove(path + "-shm")
}

// TestCatchUpToTheWritersHead: an index that knows the log's writer (the
// daemon's) reads what the writer wrote since its last catch-up, as one
// that reads the files to their end does.
func TestCatchUpToTheWritersHead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := audit.Open(dir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendN := func(n int) {
		for range n {
			if err := w.Append(&gateway.Entry{ID: gateway.NewID(), Phase: gateway.PhaseDecision, Agent: "demo", Type: gateway.KindCore,
				Tool: "exec", Decision: "allow"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(10)
	x := open(t, dir)
	x.head = w.Position
	for _, tc := range []struct{ write, want int }{{0, 10}, {0, 0}, {5, 5}, {0, 0}, {1, 1}} {
		appendN(tc.write)
		if n, err := x.CatchUp(); err != nil || n != tc.want {
			t.Fatalf("after writing %d: caught up %d (%v), want %d", tc.write, n, err, tc.want)
		}
	}
	sameAsLog(t, x, dir)
}
