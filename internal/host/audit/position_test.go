package audit

import (
	"errors"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// TestScanAfter: from a position taken at any point — an empty log, mid
// file, just before a rotation, after a reopen — ScanAfter yields exactly the
// entries written after it, across rotated files.
func TestScanAfter(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxFileBytes: 2000} // a rotation every few entries
	w := open(t, dir, opts)
	positions := map[int]Position{0: w.Position()} // entries written before → position
	for i := range 40 {
		if err := w.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
		positions[i+1] = w.Position()
	}
	w.Close()
	w = open(t, dir, opts) // a reopen resumes the same position
	if w.Position() != positions[40] {
		t.Fatalf("position after reopen %+v, want %+v", w.Position(), positions[40])
	}
	for i := 40; i < 45; i++ {
		if err := w.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if rotated, err := rotatedFiles(dir); err != nil || len(rotated) < 3 {
		t.Fatalf("the test needs rotations: %d rotated files, %v", len(rotated), err)
	}
	for before, pos := range positions {
		var got []string
		err := ScanAfter(dir, pos, func(e *gateway.Entry) error { got = append(got, e.ID); return nil })
		if err != nil {
			t.Fatalf("after %d entries: %v", before, err)
		}
		if len(got) != 45-before || (len(got) > 0 && got[0] != fmt.Sprintf("id%03d", before)) {
			t.Fatalf("after %d entries (%+v): got %v", before, pos, got)
		}
	}
	bogus := Position{Offset: positions[3].Offset, Hash: positions[4].Hash}
	if err := ScanAfter(dir, bogus, func(*gateway.Entry) error { return nil }); !errors.Is(err, ErrPositionNotFound) {
		t.Fatalf("a position naming no line: %v", err)
	}
}
