package pidlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestOneHolder: the lock is one process's (a second open file description
// of this process counts as another); the refusal names the holder; a
// holder that lets go cleanly leaves the file empty, one that does not
// leaves its pid, which the next holder sees as a crash.
func TestOneHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := Take(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Crashed() {
		t.Error("a new lock file reads as a crash")
	}
	_, err = Take(path)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Holder() != "pid "+strconv.Itoa(os.Getpid()) {
		t.Fatalf("second Take: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Errorf("released lock still names %q", b)
	}
	l, err = Take(path)
	if err != nil || l.Crashed() {
		t.Fatalf("after a clean release: %v, crashed %v", err, l != nil && l.Crashed())
	}
	l.f.Close() // the process ends without Release
	l, err = Take(path)
	if err != nil || !l.Crashed() {
		t.Fatalf("after a holder that did not let go: %v, crashed %v", err, l != nil && l.Crashed())
	}
	l.Release()
}
