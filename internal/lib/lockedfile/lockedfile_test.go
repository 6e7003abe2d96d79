package lockedfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func parseCounts(b []byte) (map[string]int, error) {
	m := map[string]int{}
	if len(b) == 0 {
		return m, nil
	}
	return m, json.Unmarshal(b, &m)
}

func read(t *testing.T, f *File[map[string]int]) map[string]int {
	t.Helper()
	var out map[string]int
	if err := f.Read(func(m map[string]int) { out = map[string]int{"n": m["n"], "len": len(m)} }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Two holders of one file (the daemon and the CLI) edit it at once: no
// change is lost, and each sees the other's edits on its next read.
func TestConcurrentEditsAndRereads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	a, err := Open(path, parseCounts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, parseCounts)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, a); got["len"] != 0 {
		t.Fatalf("missing file read as %v", got)
	}
	var wg sync.WaitGroup
	for _, f := range []*File[map[string]int]{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if err := f.Edit(func(m map[string]int) (map[string]int, error) { m["n"]++; return m, nil }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	before := b.Loads()
	if ga, gb := read(t, a), read(t, b); ga["n"] != 100 || gb["n"] != 100 {
		t.Fatalf("after 100 edits: a sees %v, b sees %v", ga, gb)
	}
	if err := a.Edit(func(m map[string]int) (map[string]int, error) { m["n"] = 7; return m, nil }); err != nil {
		t.Fatal(err)
	}
	if got := read(t, b); got["n"] != 7 || b.Loads() == before {
		t.Fatalf("b did not re-read a's edit: %v (loads %d → %d)", got, before, b.Loads())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode: %v %v", fi.Mode(), err)
	}
}

// A file that no longer parses is an error for readers, and an edit of it
// leaves it as it was.
func TestCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	f, err := Open(path, parseCounts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Read(func(map[string]int) {}); err == nil {
		t.Fatal("a corrupt file was read")
	}
	if err := f.Edit(func(m map[string]int) (map[string]int, error) { return m, nil }); err == nil {
		t.Fatal("a corrupt file was edited")
	}
	if b, _ := os.ReadFile(path); string(b) != "{not json" {
		t.Fatalf("file rewritten: %q", b)
	}
	if _, err := Open(path, parseCounts); err == nil {
		t.Fatal("a corrupt file opened")
	}
}

// TestRemoveLeftover: the temporary file of an edit cut short by a crash is
// removed; with none there is nothing to do and no lock file is made.
func TestRemoveLeftover(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := RemoveLeftover(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".lock"); !os.IsNotExist(err) {
		t.Fatalf("a lock file was made with nothing to remove: %v", err)
	}
	if err := os.WriteFile(path+".tmp", []byte(`{"half":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveLeftover(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("leftover still there: %v", err)
	}
}
