package audit

import (
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

func decision(id, verdict string) *gateway.Entry {
	e := entry(0)
	e.ID, e.Decision = id, verdict
	return e
}

func result(id string) *gateway.Entry {
	e := entry(0)
	e.ID, e.Phase, e.Args = id, gateway.PhaseResult, nil
	return e
}

func appendAll(t *testing.T, w *Writer, es ...*gateway.Entry) {
	t.Helper()
	for _, e := range es {
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
}

// phases returns, per id, the phases on record and the result's error.
func phases(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	if err := Query(dir, Filter{}, func(e *gateway.Entry) error {
		out[e.ID] = append(out[e.ID], string(e.Phase)+":"+e.Error)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCloseInterrupted: after an unclean stop, Open gives every allowed call
// without a result an Interrupted result — once; a denied or finished call
// gets none; after a clean Close there is nothing to look for; and the look
// reads a bounded end of the log.
func TestCloseInterrupted(t *testing.T) {
	dir := t.TempDir()
	daemon := Options{CloseInterrupted: true}
	w := open(t, dir, daemon)
	appendAll(t, w, decision("ran", "allow"), decision("denied", "deny"), decision("done", "allow"), result("done"))
	w.Close() // "ran" is still open: not a clean close

	w = open(t, dir, Options{}) // a reader's Open closes nothing
	w.Close()
	if got := phases(t, dir)["ran"]; len(got) != 1 {
		t.Fatalf("Open without CloseInterrupted wrote for an open call: %v", got)
	}

	w = open(t, dir, daemon)
	if w.wasClean {
		t.Fatal("a close with an open call counted as clean")
	}
	got := phases(t, dir)
	if r := got["ran"]; len(r) != 2 || r[1] != "result:"+Interrupted {
		t.Fatalf("open call: %v", r)
	}
	if len(got["denied"]) != 1 || len(got["done"]) != 2 {
		t.Fatalf("denied or finished call touched: %v", got)
	}
	w.Close() // nothing open now: clean

	w = open(t, dir, daemon)
	if !w.wasClean {
		t.Fatal("a clean close not recognised")
	}
	appendAll(t, w, decision("crashed", "allow"))
	// A crash: the writer never closes. The next Open must not trust the
	// clean mark it found before.
	w2 := open(t, dir, daemon)
	if r := phases(t, dir)["crashed"]; len(r) != 2 || r[1] != "result:"+Interrupted {
		t.Fatalf("call open at a crash: %v", r)
	}
	w2.Close()
	verifyOK(t, dir, 7)

	// Only the end of the log is read.
	defer func(n int64) { maxOpenScan = n }(maxOpenScan)
	maxOpenScan = 4096
	w = open(t, dir, daemon)
	appendAll(t, w, decision("far", "allow"))
	for range 20 {
		appendAll(t, w, decision("filler", "deny"))
	}
	appendAll(t, w, decision("near", "allow"))
	w3 := open(t, dir, daemon)
	w3.Close()
	got = phases(t, dir)
	if len(got["far"]) != 1 || len(got["near"]) != 2 {
		t.Fatalf("bounded look: far %v, near %v", got["far"], got["near"])
	}
}
