package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func FuzzParseLine(f *testing.F) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range 3 {
		buf.Reset()
		encodeLine(&buf, enc, entry(i), "")
		f.Add(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
	}
	f.Add([]byte(`{"hash":"` + string(bytes.Repeat([]byte{'a'}, 64)) + `"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseLine(line)
		if err != nil {
			return
		}
		// Anything accepted re-encodes to a line that verifies the same way.
		if e.Hash != lineHash(line) {
			t.Fatalf("accepted hash %q, line claims %q", e.Hash, lineHash(line))
		}
		buf.Reset()
		if err := encodeLine(&buf, enc, e, e.Prev); err != nil {
			return // e.g. a detail value that does not marshal back
		}
		if _, err := parseLine(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})); err != nil {
			t.Fatalf("re-encoded line does not verify: %v", err)
		}
	})
}

// FuzzOpenRepair: whatever a crash (or anyone) leaves after good lines,
// Open succeeds, the good lines stay, and new appends chain on.
func FuzzOpenRepair(f *testing.F) {
	f.Add([]byte(`{"ts":"2026`))
	f.Add([]byte("\x00\x00\n{}\n"))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		write(t, dir, Options{}, 0, 3)
		path := filepath.Join(dir, CurrentFile)
		good, _ := os.ReadFile(path)
		os.WriteFile(path, append(good, tail...), 0o600)
		w, err := Open(dir, Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append(entry(3)); err != nil {
			t.Fatal(err)
		}
		w.Close()
		data, _ := os.ReadFile(path)
		if !bytes.HasPrefix(data, good) {
			t.Fatal("good lines changed")
		}
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() && rep.Bad.Line < 4 {
			t.Fatalf("good lines reported bad: %v", rep.Bad)
		}
	})
}
