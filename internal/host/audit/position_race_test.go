package audit

import (
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// TestScanLinesAfterRotationDuringScan: the writer rotates while a scan
// reads an older file, so the file the scan listed as audit.jsonl is
// renamed before it is opened. The scan must still deliver every entry
// once, in chain order — not jump to the new audit.jsonl and skip the
// renamed one (a follower would then lose those entries for good).
func TestScanLinesAfterRotationDuringScan(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{MaxFileBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendN := func(n int) {
		for range n {
			if err := w.Append(&gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: gateway.PhaseDecision,
				Agent: "demo", Type: gateway.KindCore, Tool: "exec", Decision: "allow",
				Args: []byte(`{"command":"echo some words to fill the file up"}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(40) // a rotated file and audit.jsonl
	if files, _ := rotatedFiles(dir); len(files) == 0 {
		t.Fatal("no rotation: the test needs one")
	}
	var got []*gateway.Entry
	rotated := false
	err = ScanLinesAfter(dir, Position{}, func(e *gateway.Entry, _ []byte, _ Position) error {
		got = append(got, e)
		if !rotated {
			rotated = true
			appendN(60) // rotates audit.jsonl away while the scan is in the first file
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Prev != got[i-1].Hash {
			t.Fatalf("entry %d does not follow entry %d: the scan skipped part of the chain", i+1, i)
		}
	}
	var all int
	if err := ScanAfter(dir, Position{}, func(*gateway.Entry) error { all++; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) < 40 || all != 100 {
		t.Fatalf("scan delivered %d, the log holds %d (want 100)", len(got), all)
	}
}
