package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/testenv/wait"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func entry(i int) *gateway.Entry {
	return &gateway.Entry{
		TS: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC), ID: fmt.Sprintf("id%03d", i), Phase: gateway.PhaseDecision,
		Agent: "demo", Type: gateway.KindCore, Tool: "exec",
		Args:     json.RawMessage(fmt.Sprintf(`{"command":"echo %d <&>"}`, i)),
		Decision: "allow", Rule: "default",
	}
}

func open(t testing.TB, dir string, opts Options) *Writer {
	t.Helper()
	opts.Logger = quiet
	w, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// write appends n entries numbered from first and closes the writer.
func write(t testing.TB, dir string, opts Options, first, n int) {
	t.Helper()
	w := open(t, dir, opts)
	for i := first; i < first+n; i++ {
		if err := w.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func verifyOK(t *testing.T, dir string, entries int) *VerifyReport {
	t.Helper()
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %v", rep.Bad)
	}
	if rep.Entries != entries {
		t.Fatalf("verify counted %d entries, want %d", rep.Entries, entries)
	}
	return rep
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(data), "\n")
}

func TestAppendChainsAndSetsHash(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{})
	a, b := entry(1), entry(2)
	if err := w.Append(a); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(b); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if a.Prev != "" || len(a.Hash) != 64 || b.Prev != a.Hash {
		t.Fatalf("chain: a.prev=%q a.hash=%q b.prev=%q", a.Prev, a.Hash, b.Prev)
	}
	ls := lines(t, filepath.Join(dir, CurrentFile))
	if !strings.HasSuffix(ls[0], `"hash":"`+a.Hash+"\"}\n") || !strings.Contains(ls[0], `<&>`) {
		t.Fatalf("line 1 = %s", ls[0])
	}
	verifyOK(t, dir, 2)
	// Reopening resumes the chain.
	write(t, dir, Options{}, 3, 1)
	verifyOK(t, dir, 3)
}

func TestRotationKeepsChain(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxFileBytes: 1500}
	write(t, dir, opts, 0, 20)
	write(t, dir, opts, 20, 20) // across a reopen too
	rep := verifyOK(t, dir, 40)
	rotated, _ := rotatedFiles(dir)
	if rep.Files != len(rotated)+1 || len(rotated) < 5 {
		t.Fatalf("files=%d rotated=%d", rep.Files, len(rotated))
	}
	for _, p := range rotated {
		if fi, _ := os.Stat(p); fi.Size() > opts.MaxFileBytes {
			t.Errorf("%s is %d bytes, over the limit", p, fi.Size())
		}
	}
	var ids []string
	if err := Query(dir, Filter{}, func(e *gateway.Entry) error { ids = append(ids, e.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 40 || ids[0] != "id000" || ids[39] != "id039" {
		t.Fatalf("query order: %v", ids)
	}
}

func TestCrashBetweenRotateAndCreate(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, Options{}, 0, 3)
	// The rename happened, the new audit.jsonl did not.
	os.Rename(filepath.Join(dir, CurrentFile), filepath.Join(dir, "audit-20240101T000000.000000000Z.jsonl"))
	verifyOK(t, dir, 3)
	n := 0
	if err := Query(dir, Filter{}, func(*gateway.Entry) error { n++; return nil }); err != nil || n != 3 {
		t.Fatalf("query without audit.jsonl: %d entries, %v", n, err)
	}
	write(t, dir, Options{}, 3, 2)
	verifyOK(t, dir, 5)
}

func TestTornTailRepairedOnOpen(t *testing.T) {
	for name, tail := range map[string]string{
		"no newline":      `{"ts":"2026-01-01T00:00:00Z","id":"x","pha`,
		"zeros":           strings.Repeat("\x00", 300) + "\n",
		"zeros then torn": strings.Repeat("\x00", 10) + "\n" + `{"ts"`,
		"garbage line":    "not json\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, Options{}, 0, 5)
			path := filepath.Join(dir, CurrentFile)
			good, _ := os.ReadFile(path)
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString(tail)
			f.Close()
			if rep, _ := Verify(dir); rep.OK() || rep.Bad.Line != 6 {
				t.Fatalf("torn tail not reported at line 6: %+v", rep.Bad)
			}
			write(t, dir, Options{}, 5, 1)
			verifyOK(t, dir, 6)
			if data, _ := os.ReadFile(path); !strings.HasPrefix(string(data), string(good)) {
				t.Fatal("repair changed good lines")
			}
		})
	}
}

func TestConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{MaxFileBytes: 16 << 10})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() { errs <- w.Append(entry(i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := w.Stats()
	w.Close()
	if st.Entries != 200 || st.Syncs == 0 || st.Syncs > 200 {
		t.Fatalf("stats %+v", st)
	}
	verifyOK(t, dir, 200)
	seen := map[string]bool{}
	Query(dir, Filter{}, func(e *gateway.Entry) error { seen[e.ID] = true; return nil })
	if len(seen) != 200 {
		t.Fatalf("%d distinct ids on disk, want 200", len(seen))
	}
}

func TestAppendAfterClose(t *testing.T) {
	w := open(t, t.TempDir(), Options{})
	w.Close()
	if err := w.Append(entry(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestOpenFailsWhenDirUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := Open(filepath.Join(file, "logs"), Options{Logger: quiet}); err == nil {
		t.Fatal("Open under a regular file succeeded")
	}
	if os.Geteuid() != 0 { // root writes anyway
		ro := t.TempDir()
		os.Chmod(ro, 0o500)
		defer os.Chmod(ro, 0o700)
		if _, err := Open(ro, Options{Logger: quiet}); err == nil {
			t.Fatal("Open in a read-only dir succeeded")
		}
	}
}

func TestAppendFailsClosed(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{})
	if err := w.Append(entry(0)); err != nil {
		t.Fatal(err)
	}
	// Make the file unwritable under the writer: writes now fail as on a
	// full or broken disk. No Append is in flight, so the swap is safe.
	ro, err := os.Open(filepath.Join(dir, CurrentFile))
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close()
	w.f = ro
	for i := 1; i <= 2; i++ { // refused for as long as the file stays unwritable
		if err := w.Append(entry(i)); err == nil {
			t.Fatalf("append %d succeeded on an unwritable file", i)
		}
	}
	w.Close()
	write(t, dir, Options{}, 3, 1)
	verifyOK(t, dir, 2)
}

// TestEnqueueOrderedAndFlushed: enqueued entries keep their place in the
// chain and are on disk once Flush returns.
func TestEnqueueOrderedAndFlushed(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 50 {
		e := &gateway.Entry{ID: fmt.Sprint(i), Phase: gateway.PhaseResult, Agent: "a", Type: gateway.KindCore, Tool: "exec", Decision: "allow"}
		if i%2 == 0 {
			w.Enqueue(e)
		} else if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := Query(dir, Filter{}, func(e *gateway.Entry) error { ids = append(ids, e.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 50 || ids[0] != "0" || ids[49] != "49" {
		t.Fatalf("entries on disk after Flush: %v", ids)
	}
	if rep, err := Verify(dir); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Bad)
	}
	w.Close()
	if err := w.Flush(); err != ErrClosed {
		t.Fatalf("Flush after Close: %v", err)
	}
}

// TestCloseReportsLostEnqueued: an enqueued entry that could not be written
// has no caller to tell; Close must report it.
func TestCloseReportsLostEnqueued(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{})
	ro, err := os.Open(filepath.Join(dir, CurrentFile))
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close() // no entry is in flight, so the swap is safe
	w.f = ro
	w.Enqueue(entry(0))
	if err := w.Close(); err == nil {
		t.Fatal("Close returned nil after an enqueued entry was lost")
	}
}

// An enqueued entry is held for the next append somebody waits for, and
// both are made durable by one fsync: a sequential agent's next decision
// does not wait behind its last result's own fsync.
func TestEnqueuedRidesWithNextAppend(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{AsyncHold: time.Hour})
	defer w.Close()
	res := result("r1")
	w.Enqueue(res)
	if err := w.Append(decision("d2", "allow")); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Entries != 2 || st.Syncs != 1 {
		t.Fatalf("%+v, want 2 entries in 1 fsync", st)
	}
	if got := phases(t, dir); len(got["r1"]) != 1 || len(got["d2"]) != 1 {
		t.Fatalf("entries on disk: %v", got)
	}
}

// A held entry is written without anybody appending after it, by Flush at
// once, and by Close.
func TestEnqueuedHeldIsWritten(t *testing.T) {
	t.Run("after the hold", func(t *testing.T) {
		w := open(t, t.TempDir(), Options{AsyncHold: time.Millisecond})
		defer w.Close()
		w.Enqueue(result("r1"))
		wait.For(t, "the held entry written", func() bool { return w.Stats().Entries == 1 })
	})
	t.Run("flush", func(t *testing.T) {
		dir := t.TempDir()
		w := open(t, dir, Options{AsyncHold: time.Hour})
		defer w.Close()
		w.Enqueue(result("r1"))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := phases(t, dir); len(got["r1"]) != 1 {
			t.Fatalf("entries on disk after Flush: %v", got)
		}
	})
	t.Run("close", func(t *testing.T) {
		dir := t.TempDir()
		w := open(t, dir, Options{AsyncHold: time.Hour})
		w.Enqueue(result("r1"))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := phases(t, dir); len(got["r1"]) != 1 {
			t.Fatalf("entries on disk after Close: %v", got)
		}
	})
}

// gid is the calling goroutine's id, from its stack's first line.
func gid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return strings.Fields(string(b))[1]
}

// blockFirstCommit makes w's first committer wait, once it has its batch,
// until release is closed; entered is closed when it waits.
func blockFirstCommit(w *Writer) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	w.committing = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	return entered, release
}

func queued(w *Writer) int {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return len(w.queue)
}

// An Append nobody else is committing for is written by its own
// goroutine: one at a time, calls hand nothing to another goroutine.
func TestAppendCommitsInCallersGoroutine(t *testing.T) {
	w := open(t, t.TempDir(), Options{})
	defer w.Close()
	var by []string
	w.committing = func() { by = append(by, gid()) }
	for i := range 3 {
		if err := w.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if me := gid(); len(by) != 3 || by[0] != me || by[1] != me || by[2] != me {
		t.Fatalf("committed by goroutines %v, want 3 × %s (the caller's)", by, me)
	}
}

// Calls that come while one commits queue up; the first of them that waits
// commits them all, in arrival order, with one fsync.
func TestQueuedCallsCommitTogether(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{AsyncHold: time.Hour})
	defer w.Close()
	entered, release := blockFirstCommit(w)
	errs := make(chan error, 11)
	go func() { errs <- w.Append(entry(0)) }()
	<-entered
	for i := 1; i <= 10; i++ {
		go func() { errs <- w.Append(entry(i)) }()
		if i%3 == 0 {
			wait.For(t, "the appends queued", func() bool { return queued(w) == i+i/3-1 })
			w.Enqueue(result(fmt.Sprint("r", i)))
		}
	}
	wait.For(t, "13 entries queued", func() bool { return queued(w) == 13 })
	w.qmu.Lock()
	var want []string
	for _, r := range w.queue {
		want = append(want, r.e.ID)
	}
	w.qmu.Unlock()
	close(release)
	for range 11 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st := w.Stats(); st.Entries != 14 || st.Syncs != 2 {
		t.Fatalf("%+v, want 14 entries in 2 fsyncs", st)
	}
	var got []string
	if err := Query(dir, Filter{}, func(e *gateway.Entry) error { got = append(got, e.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 14 || got[0] != "id000" || strings.Join(got[1:], " ") != strings.Join(want, " ") {
		t.Fatalf("on disk %v, want id000 then %v", got, want)
	}
	verifyOK(t, dir, 14)
}

// An entry enqueued while another commits is left held when nobody waits
// for it, and the hold writes it.
func TestEnqueuedDuringCommitIsHeld(t *testing.T) {
	w := open(t, t.TempDir(), Options{AsyncHold: 5 * time.Millisecond})
	defer w.Close()
	entered, release := blockFirstCommit(w)
	errs := make(chan error, 1)
	go func() { errs <- w.Append(entry(0)) }()
	<-entered
	w.Enqueue(result("r1"))
	close(release)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Entries != 1 {
		t.Fatalf("%+v: the enqueued entry went with the batch before it", st)
	}
	wait.For(t, "the enqueued entry written", func() bool { return w.Stats().Entries == 2 })
}

// Close waits for a commit under way, then writes what is still queued.
func TestCloseWaitsForCommitter(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{AsyncHold: time.Hour})
	entered, release := blockFirstCommit(w)
	errs := make(chan error, 2)
	go func() { errs <- w.Append(entry(0)) }()
	<-entered
	w.Enqueue(result("r1"))
	go func() { errs <- w.Close() }()
	wait.For(t, "the writer closing", func() bool {
		w.qmu.Lock()
		defer w.qmu.Unlock()
		return w.closed
	})
	if err := w.Append(entry(2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append while closing: %v", err)
	}
	select {
	case err := <-errs:
		t.Fatalf("Close or Append returned (%v) while the commit was held", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := phases(t, dir); len(got["id000"]) != 1 || len(got["r1"]) != 1 {
		t.Fatalf("entries on disk after Close: %v", got)
	}
}
