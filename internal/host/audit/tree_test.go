package audit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// TestTreeMatchesTlog: the writer's tree, which keeps only the newest node
// of each level, stores and roots exactly what tlog computes from every
// stored hash.
func TestTreeMatchesTlog(t *testing.T) {
	var all []tlog.Hash
	hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = all[x]
		}
		return out, nil
	})
	tr := &tree{}
	for n := range int64(300) {
		var h [32]byte
		h[0], h[1] = byte(n), byte(n>>8)
		want, err := tlog.StoredHashes(n, h[:], hr)
		if err != nil {
			t.Fatal(err)
		}
		tr.add(h)
		all = append(all, want...)
		if got := tr.pending; string(got) != string(hashBytes(want)) {
			t.Fatalf("leaf %d: stored hashes differ", n)
		}
		tr.pending = tr.pending[:0]
		root, err := tlog.TreeHash(n+1, hr)
		if err != nil || tr.root() != root {
			t.Fatalf("size %d: root %s, tlog's %s (%v)", n+1, tr.root(), root, err)
		}
	}
	if leavesIn(tlog.StoredHashCount(300)) != 300 || leavesIn(tlog.StoredHashCount(302)-1) != 301 {
		t.Fatal("leavesIn is not StoredHashCount's inverse")
	}
}

func hashBytes(hs []tlog.Hash) []byte {
	var b []byte
	for _, h := range hs {
		b = append(b, h[:]...)
	}
	return b
}

// testKey is a signer key named origin and its verifier.
func testKey(t testing.TB, origin string) (note.Signer, note.Verifier) {
	s, v, _ := testKeyText(t, origin)
	return s, v
}

// testKeyText is testKey with the verifier key's text.
func testKeyText(t testing.TB, origin string) (note.Signer, note.Verifier, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v, vkey
}

// treeFile is the tree file's bytes.
func treeFile(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, TreeFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rebuilt is the tree file a rebuild from the log writes.
func rebuilt(t testing.TB, dir string) string {
	t.Helper()
	copyDir := t.TempDir()
	files, _ := allFiles(dir)
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			os.WriteFile(filepath.Join(copyDir, filepath.Base(f)), b, 0o600)
		}
	}
	w := open(t, copyDir, Options{})
	w.Close()
	return treeFile(t, copyDir)
}

// TestTreeKeptAcrossCrashes: the tree file follows the log; cut short (a
// crash between the log's fsync and its write) it is completed from the
// log's tail, gone it is rebuilt, wrong it is rebuilt, and the tree goes on
// across a restart and a rotation.
func TestTreeKeptAcrossCrashes(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxFileBytes: 4 << 10}
	write(t, dir, opts, 0, 40)
	full := treeFile(t, dir)
	if full != rebuilt(t, dir) || int64(len(full)) != tlog.StoredHashCount(40)*tlog.HashSize {
		t.Fatalf("the tree file (%d bytes) is not the log's tree", len(full))
	}
	for _, tc := range []struct {
		name   string
		damage func(path string)
	}{
		{"short by five leaves", func(p string) { os.Truncate(p, tlog.StoredHashCount(35)*tlog.HashSize) }},
		{"torn mid-hash", func(p string) { os.Truncate(p, tlog.StoredHashCount(38)*tlog.HashSize+7) }},
		{"gone", func(p string) { os.Remove(p) }},
		{"last leaf wrong", func(p string) {
			f, _ := os.OpenFile(p, os.O_RDWR, 0)
			f.WriteAt([]byte("x"), tlog.StoredHashIndex(0, 39)*tlog.HashSize)
			f.Close()
		}},
		{"longer than the log", func(p string) {
			f, _ := os.OpenFile(p, os.O_RDWR|os.O_APPEND, 0)
			f.Write(make([]byte, 3*tlog.HashSize))
			f.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.damage(filepath.Join(dir, TreeFile))
			w := open(t, dir, opts)
			w.Close()
			if got := treeFile(t, dir); got != full {
				t.Fatalf("the tree file was not made whole again (%d bytes, want %d)", len(got), len(full))
			}
		})
	}
	write(t, dir, opts, 40, 30)
	if got := treeFile(t, dir); got != rebuilt(t, dir) || int64(len(got)) != tlog.StoredHashCount(70)*tlog.HashSize {
		t.Fatal("after a restart the tree did not go on with the log")
	}
	rep := verifyOK(t, dir, 70)
	if rep.TreeStale != "" || rep.Files < 2 {
		t.Fatalf("verify: %+v", rep)
	}
}

// TestVerifySaysTreeStale: a tree file that disagrees with an intact log
// is reported as stale, not as a bad log, and the next writer rebuilds it.
func TestVerifySaysTreeStale(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, Options{}, 0, 20)
	f, _ := os.OpenFile(filepath.Join(dir, TreeFile), os.O_RDWR, 0)
	f.WriteAt([]byte("x"), tlog.StoredHashIndex(0, 7)*tlog.HashSize)
	f.Close()
	rep := verifyOK(t, dir, 20)
	if !strings.Contains(rep.TreeStale, "from leaf 7") {
		t.Fatalf("stale tree: %q", rep.TreeStale)
	}
	if err := MarkTreeStale(dir); err != nil {
		t.Fatal(err)
	}
	w := open(t, dir, Options{})
	w.Close()
	if rep := verifyOK(t, dir, 20); rep.TreeStale != "" {
		t.Fatalf("not rebuilt: %q", rep.TreeStale)
	}
	if _, err := os.Stat(filepath.Join(dir, treeStaleFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale mark stays: %v", err)
	}
}

// leafOf is the leaf hash of a line with its newline.
func leafOf(line string) tlog.Hash {
	var h [32]byte
	hex.Decode(h[:], []byte(lineHash([]byte(strings.TrimSuffix(line, "\n")))))
	return proof.LeafHash(h)
}

// rechain gives lines (with their newlines) from i on the hashes and
// prevs a chain of them has: what an editor who knows the format does
// after changing or dropping a line, so the chain alone shows nothing.
func rechain(ls []string, i int) {
	for ; i < len(ls); i++ {
		if ls[i] == "" {
			continue
		}
		prev := ""
		if i > 0 {
			prev = lineHash([]byte(strings.TrimSuffix(ls[i-1], "\n")))
		}
		l := strings.TrimSuffix(ls[i], "\n")
		at := strings.LastIndex(l, `"prev":"`)
		body := l[:at] + `"prev":"` + prev + `","hash":"`
		sum := sha256.Sum256([]byte(body + `"}`))
		ls[i] = body + hex.EncodeToString(sum[:]) + "\"}\n"
	}
}
