package audit

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

func tailIDs(t *testing.T, dir string, f Filter, n int) []string {
	t.Helper()
	var ids []string
	err := Tail(context.Background(), dir, f, n, false, func(e *gateway.Entry) error { ids = append(ids, e.ID); return nil })
	if err != nil {
		t.Fatalf("Tail(n=%d): %v", n, err)
	}
	return ids
}

func idRange(from, to int) []string { // ids from..to-1
	var ids []string
	for i := from; i < to; i++ {
		ids = append(ids, entry(i).ID)
	}
	return ids
}

// TestTailFromTheEnd: the last n entries, oldest first, whichever files
// they lie in, and nothing of a line still being written.
func TestTailFromTheEnd(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, Options{MaxFileBytes: 1500}, 0, 30)
	rotated, _ := rotatedFiles(dir)
	inCur := len(lines(t, filepath.Join(dir, CurrentFile))) - 1
	inLast := len(lines(t, rotated[len(rotated)-1])) - 1
	if len(rotated) < 3 || inCur == 0 {
		t.Fatalf("want several files: %d rotated, %d entries in %s", len(rotated), inCur, CurrentFile)
	}
	// A line torn by a crash, or half written, at the end of audit.jsonl.
	torn := `{"ts":"2026-01-01T00:01:00Z","id":"torn","phase":"decision"`
	cur, err := os.OpenFile(filepath.Join(dir, CurrentFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if _, err := cur.WriteString(torn); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		n    int
		f    Filter
		want []string
	}{
		{"within audit.jsonl", inCur, Filter{}, idRange(30-inCur, 30)},
		{"across a file boundary", inCur + 1, Filter{}, idRange(29-inCur, 30)},
		{"across two boundaries", inCur + inLast + 2, Filter{}, idRange(28-inCur-inLast, 30)},
		{"more than the log", 1000, Filter{}, idRange(0, 30)},
		{"the whole log exactly", 30, Filter{}, idRange(0, 30)},
		{"none", 0, Filter{}, nil},
		{"filtered, from older files", 2, Filter{ID: "id003"}, []string{"id003"}},
		{"since skips older files", 1000, Filter{Since: time.Date(2026, 1, 1, 0, 0, 25, 0, time.UTC)}, idRange(25, 30)},
	} {
		if got := tailIDs(t, dir, tc.f, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Tail(n=%d) = %v, want %v", tc.name, tc.n, got, tc.want)
		}
	}
	if err := Tail(context.Background(), dir, Filter{}, -1, false, func(*gateway.Entry) error { return nil }); err == nil {
		t.Error("Tail(n=-1) succeeded, want an error")
	}

	// Following starts at the torn line: once it is whole it is delivered.
	defer func(d time.Duration) { pollInterval = d }(pollInterval)
	pollInterval = time.Millisecond
	next, stop := follow(t, dir, Filter{}, 1)
	if id := next(); id != "id029" {
		t.Fatalf("got %s, want id029", id)
	}
	if _, err := cur.WriteString(`,"decision":"allow"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	if id := next(); id != "torn" {
		t.Fatalf("got %s, want the completed line", id)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestTailAfterRotation: with audit.jsonl empty (just rotated) or missing
// (a crash between rename and create), the entries come from rotated files.
func TestTailAfterRotation(t *testing.T) {
	for _, keep := range []bool{true, false} {
		dir := t.TempDir()
		write(t, dir, Options{MaxFileBytes: 1500}, 0, 12)
		name := rotatedPrefix + time.Now().UTC().Format(rotatedLayout) + rotatedSuffix
		if err := os.Rename(filepath.Join(dir, CurrentFile), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if keep {
			if err := os.WriteFile(filepath.Join(dir, CurrentFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got := tailIDs(t, dir, Filter{}, 7); !slices.Equal(got, idRange(5, 12)) {
			t.Errorf("audit.jsonl kept %v: got %v", keep, got)
		}
	}
}

// TestTailReadsOnlyTheEnd: tail -n 5 of a 16 MiB file must not read it
// whole (it did: every entry of audit.jsonl was decoded and kept).
func TestTailReadsOnlyTheEnd(t *testing.T) {
	dir := t.TempDir()
	size := synthLog(t, dir, 40000, 0)
	if size < 16<<20 {
		t.Fatalf("log of %d bytes, want 16 MiB or more", size)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := tailIDs(t, dir, Filter{}, 5)
	runtime.ReadMemStats(&after)
	if len(got) != 5 || got[4] != synthID(39999) {
		t.Fatalf("tail: %v", got)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("tail -n 5 of a %d MiB log allocated %d KiB", size>>20, alloc>>10)
	}
}
