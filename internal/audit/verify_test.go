package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	stop := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				werr <- nil
				return
			default:
			}
			if err := w.Append(entry(i % 60)); err != nil {
				werr <- err
				return
			}
		}
	}()
	for range 300 {
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("verify of a live, rotating log: %v", rep.Bad)
		}
	}
	close(stop)
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
