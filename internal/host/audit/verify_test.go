package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

func TestVerifyDetectsTampering(t *testing.T) {
	edit := func(f func(ls []string) []string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, CurrentFile)
			ls := f(lines(t, path))
			if err := os.WriteFile(path, []byte(strings.Join(ls, "")), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// lines() ends with "" after the last newline; indexes are 0-based.
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		file   string
		line   int
		reason string
	}{
		{"edit one byte", edit(func(ls []string) []string {
			ls[3] = strings.Replace(ls[3], `"demo"`, `"demx"`, 1)
			return ls
		}), CurrentFile, 4, "hash mismatch"},
		{"break the json", edit(func(ls []string) []string {
			ls[3] = strings.Replace(ls[3], `"agent"`, `"agent`, 1)
			return ls
		}), CurrentFile, 4, "not a valid entry"},
		{"remove a line", edit(func(ls []string) []string {
			return append(ls[:3], ls[4:]...)
		}), CurrentFile, 4, "removed, inserted or reordered"},
		{"insert a copy", edit(func(ls []string) []string {
			return append(ls[:4], ls[3:]...)
		}), CurrentFile, 5, "removed, inserted or reordered"},
		{"swap two lines", edit(func(ls []string) []string {
			ls[3], ls[4] = ls[4], ls[3]
			return ls
		}), CurrentFile, 4, "removed, inserted or reordered"},
		{"remove the first line", edit(func(ls []string) []string {
			return ls[1:]
		}), CurrentFile, 1, "chain does not start here"},
		{"truncate the end", edit(func(ls []string) []string {
			return ls[:7]
		}), CurrentFile, 8, "entries missing at the end"},
		{"truncate the end, then append", func(t *testing.T, dir string) {
			edit(func(ls []string) []string { return ls[:7] })(t, dir)
			write(t, dir, Options{}, 100, 2)
		}, CurrentFile, 8, "removed, inserted or reordered"},
		{"truncate mid-line", func(t *testing.T, dir string) {
			path := filepath.Join(dir, CurrentFile)
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()-10)
		}, CurrentFile, 10, "torn line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, Options{}, 0, 10)
			verifyOK(t, dir, 10)
			tc.tamper(t, dir)
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || rep.Bad.File != tc.file || rep.Bad.Line != tc.line || !strings.Contains(rep.Bad.Reason, tc.reason) {
				t.Fatalf("got %v, want %s:%d: …%s…", rep.Bad, tc.file, tc.line, tc.reason)
			}
		})
	}
}

func TestVerifyAcrossRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, Options{MaxFileBytes: 1500}, 0, 20)
	rotated, _ := rotatedFiles(dir)
	// Editing a rotated file names that file.
	ls := lines(t, rotated[1])
	ls[1] = strings.Replace(ls[1], `"allow"`, `"deny"`, 1)
	os.WriteFile(rotated[1], []byte(strings.Join(ls, "")), 0o600)
	rep, _ := Verify(dir)
	if rep.OK() || rep.Bad.File != filepath.Base(rotated[1]) || rep.Bad.Line != 2 {
		t.Fatalf("got %v", rep.Bad)
	}
	// Removing the oldest file breaks the start of the chain.
	dir = t.TempDir()
	write(t, dir, Options{MaxFileBytes: 1500}, 0, 20)
	rotated, _ = rotatedFiles(dir)
	os.Remove(rotated[0])
	rep, _ = Verify(dir)
	if rep.OK() || rep.Bad.File != filepath.Base(rotated[1]) || rep.Bad.Line != 1 {
		t.Fatalf("got %v", rep.Bad)
	}
}

func TestVerifyMissingDir(t *testing.T) {
	if _, err := Verify(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("Verify of a missing dir succeeded")
	}
}

// TestVerifyWhileRotating: verifying a live log must not report a break when
// the writer rotates in the middle of the walk.
func TestVerifyWhileRotating(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{MaxFileBytes: 600}) // about two entries a file
	defer w.Close()
	whileRotating(t, w, func(int) error {
		rep, err := Verify(dir)
		if err == nil && !rep.OK() {
			err = fmt.Errorf("verify of a live, rotating log: %v", rep.Bad)
		}
		return err
	})
}

// whileRotating appends rotatingEntries entries to w (ids 0, 1, …), as fast
// as it takes them, and calls read until they are all written and once
// after, with how many were written before the call began. A bounded
// count, not a bounded number of reads: the files to read grow with the
// writes, and a slow build (-race) would otherwise make thousands.
func whileRotating(t *testing.T, w *Writer, read func(written int) error) {
	t.Helper()
	var written atomic.Int64
	werr := make(chan error, 1)
	go func() {
		for i := range rotatingEntries {
			e := entry(i % 60)
			e.ID = fmt.Sprint(i)
			if err := w.Append(e); err != nil {
				werr <- err
				return
			}
			written.Add(1)
		}
		werr <- nil
	}()
	for done := false; !done; {
		select {
		case err := <-werr:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		default:
		}
		if err := read(int(written.Load())); err != nil {
			t.Fatal(err)
		}
	}
}

const rotatingEntries = 1000

// TestVerifyNamesFileAndLine: damage anywhere in a log of several files is
// reported at the file and line where it is, with what is wrong.
func TestVerifyNamesFileAndLine(t *testing.T) {
	type files = []string // the log's files, oldest first
	rewrite := func(t *testing.T, path string, f func(ls []string) []string) {
		if err := os.WriteFile(path, []byte(strings.Join(f(lines(t, path)), "")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, fs files)
		file   int // index in files
		line   int
		reason string
	}{
		{"a byte flipped", func(t *testing.T, fs files) {
			rewrite(t, fs[1], func(ls []string) []string { ls[6] = strings.Replace(ls[6], "pkg", "pkh", 1); return ls })
		}, 1, 7, "hash mismatch"},
		{"a byte of the hash flipped", func(t *testing.T, fs files) {
			rewrite(t, fs[1], func(ls []string) []string {
				b := []byte(ls[6])
				b[len(b)-5] ^= 1
				ls[6] = string(b)
				return ls
			})
		}, 1, 7, "hash mismatch"},
		{"a line deleted", func(t *testing.T, fs files) {
			rewrite(t, fs[1], func(ls []string) []string { return append(ls[:6], ls[7:]...) })
		}, 1, 7, "removed, inserted or reordered"},
		{"lines reordered", func(t *testing.T, fs files) {
			rewrite(t, fs[2], func(ls []string) []string { ls[6], ls[7] = ls[7], ls[6]; return ls })
		}, 2, 7, "removed, inserted or reordered"},
		{"an empty line", func(t *testing.T, fs files) {
			rewrite(t, fs[1], func(ls []string) []string { ls[6] = "\n" + ls[6]; return ls })
		}, 1, 7, "no trailing hash field"},
		{"a rotated file cut mid-line", func(t *testing.T, fs files) {
			fi, _ := os.Stat(fs[1])
			os.Truncate(fs[1], fi.Size()-10)
		}, 1, 50, "torn line"},
		{"a rotated file's last line cut", func(t *testing.T, fs files) {
			rewrite(t, fs[1], func(ls []string) []string { return append(ls[:49], "") })
		}, 2, 1, "removed, inserted or reordered"},
		{"a rotated file removed", func(t *testing.T, fs files) { os.Remove(fs[1]) }, 2, 1, "removed, inserted or reordered"},
		{"the end cut", func(t *testing.T, fs files) {
			rewrite(t, fs[3], func(ls []string) []string { return append(ls[:40], "") })
		}, 3, 41, "entries missing at the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			synthLog(t, dir, 200, 50)
			fs, _ := allFiles(dir)
			if len(fs) != 4 {
				t.Fatalf("%d files, want 4", len(fs))
			}
			verifyOK(t, dir, 200)
			tc.tamper(t, fs)
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Base(fs[tc.file])
			if rep.OK() || rep.Bad.File != want || rep.Bad.Line != tc.line || !strings.Contains(rep.Bad.Reason, tc.reason) {
				t.Fatalf("got %v, want %s:%d: …%s…", rep.Bad, want, tc.line, tc.reason)
			}
		})
	}
}

// TestVerifyLongLine: a line longer than verify's read buffer is read and
// checked whole.
func TestVerifyLongLine(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{})
	e := entry(0)
	e.Args = json.RawMessage(`{"data":"` + strings.Repeat("x", 3<<20) + `"}`)
	for _, e := range []*gateway.Entry{entry(1), e, entry(2)} {
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	verifyOK(t, dir, 3)
	path := filepath.Join(dir, CurrentFile)
	data, _ := os.ReadFile(path)
	data[2<<20] = 'y' // inside the long line's args
	os.WriteFile(path, data, 0o600)
	rep, _ := Verify(dir)
	if rep.OK() || rep.Bad.Line != 2 || !strings.Contains(rep.Bad.Reason, "hash mismatch") {
		t.Fatalf("got %v", rep.Bad)
	}
}

// TestVerifyLargeFile: a file of many read blocks, checked on several cores,
// is followed in order, and a bad line is named by its number wherever it
// lies: in the line that crosses a block's end, or far after it.
func TestVerifyLargeFile(t *testing.T) {
	dir := t.TempDir()
	synthLog(t, dir, 20000, 0)
	verifyOK(t, dir, 20000)
	path := filepath.Join(dir, CurrentFile)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lineAt := func(off int) int { return bytes.Count(good[:off], []byte{'\n'}) + 1 }
	for _, off := range []int{blockSize - 1, blockSize, 3*blockSize + 7, len(good) - 100} {
		data := bytes.Clone(good)
		for data[off] == '"' || data[off] == '\n' { // a byte inside a value
			off++
		}
		data[off] ^= 0x01
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || rep.Bad.Line != lineAt(off) || rep.Entries != lineAt(off)-1 {
			t.Errorf("byte %d changed: got %v after %d entries, want line %d", off, rep.Bad, rep.Entries, lineAt(off))
		}
	}
}
