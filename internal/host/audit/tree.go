package audit

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/tlog"
)

// TreeFile holds the Merkle tree over the log's lines (proof.LeafHash of
// each line's hash, leaf i = line i of the chain): tlog's stored hashes,
// 32 bytes each, in its storage order (tlog.StoredHashIndex). It is derived
// from the log, so it is not fsynced: a crash that leaves it short is
// completed from the log's tail when the writer opens, and one that
// disagrees with the log is rebuilt.
const TreeFile = "tree.hashes"

// maxLevels bounds the tree's height: 2^63 leaves.
const maxLevels = 63

// tree is the Merkle tree as the writer extends it. It keeps in memory the
// newest node of each level — all that appending a leaf and computing the
// root read — and appends the stored hashes to the file.
type tree struct {
	f       *os.File
	n       int64                // leaves, those not yet durable in the log included
	last    [maxLevels]tlog.Hash // the newest node of each level
	pending []byte               // stored hashes not yet written to f
	written int64                // leaves whose stored hashes are in f
	failing bool                 // the last write to f failed (warned once)
	// the state at the last durable line, restored when a write fails
	durable struct {
		n       int64
		last    [maxLevels]tlog.Hash
		pending int
	}
}

// ReadHashes serves tlog the newest node of a level, the only hashes
// appending and TreeHash ask for.
func (t *tree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		level, k := tlog.SplitStoredHashIndex(x)
		if level >= maxLevels || k != t.n>>level-1 {
			return nil, fmt.Errorf("audit: tree: hash %d is not the newest of its level", x)
		}
		out[i] = t.last[level]
	}
	return out, nil
}

// add appends the leaf of the line whose hash is lineHash.
func (t *tree) add(lineHash [32]byte) { t.addLeaf(proof.LeafHash(lineHash)) }

// addLeaf appends a leaf hash: the new node at each level up to the
// first where it is a left child, combined with the newest node on its
// left, as tlog.StoredHashes computes them (TestTreeMatchesTlog) but
// without its allocations, on the writer's path.
func (t *tree) addLeaf(leaf tlog.Hash) {
	h := leaf
	t.pending = append(t.pending, h[:]...)
	for level := 0; ; level++ {
		left := t.last[level]
		t.last[level] = h
		if t.n>>level&1 == 0 {
			break
		}
		h = tlog.NodeHash(left, h)
		t.pending = append(t.pending, h[:]...)
	}
	t.n++
}

// root is the root of the tree of every leaf added.
func (t *tree) root() tlog.Hash {
	h, err := tlog.TreeHash(t.n, t)
	if err != nil {
		panic(err)
	}
	return h
}

// markDurable: every leaf added so far is of a durable line.
func (t *tree) markDurable() {
	t.durable.n, t.durable.last, t.durable.pending = t.n, t.last, len(t.pending)
}

// rollback forgets the leaves added since markDurable.
func (t *tree) rollback() {
	t.n, t.last = t.durable.n, t.durable.last
	t.pending = t.pending[:t.durable.pending]
}

// write appends the durable leaves' stored hashes to the file. A failure
// keeps them for the next write: the tree in memory stays right, and the
// file catches up once the disk takes it.
func (t *tree) write() error {
	if t.durable.pending == 0 {
		return nil
	}
	_, err := t.f.WriteAt(t.pending[:t.durable.pending], tlog.StoredHashCount(t.written)*tlog.HashSize)
	if err != nil {
		return err
	}
	t.written = t.durable.n
	t.pending = append(t.pending[:0], t.pending[t.durable.pending:]...)
	t.durable.pending = 0
	return nil
}

// leavesIn is how many leaves a file of hashes stored hashes holds whole.
func leavesIn(hashes int64) int64 {
	lo, hi := int64(0), hashes // StoredHashCount(k) >= k
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if tlog.StoredHashCount(mid) <= hashes {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// openTree opens the tree file of dir as it is: cut back to its last whole
// leaf, the newest node of each level read back.
func openTree(dir string) (*tree, error) {
	f, err := os.OpenFile(filepath.Join(dir, TreeFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	t := &tree{f: f}
	if err := t.load(); err != nil {
		f.Close()
		return nil, err
	}
	return t, nil
}

func (t *tree) load() error {
	fi, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	n := leavesIn(fi.Size() / tlog.HashSize)
	if whole := tlog.StoredHashCount(n) * tlog.HashSize; whole != fi.Size() {
		if err := t.f.Truncate(whole); err != nil {
			return fmt.Errorf("audit: tree: %w", err)
		}
	}
	t.n, t.written, t.pending = n, n, t.pending[:0]
	for level := 0; level < maxLevels && n>>level > 0; level++ {
		if _, err := t.f.ReadAt(t.last[level][:], tlog.StoredHashIndex(level, n>>level-1)*tlog.HashSize); err != nil {
			return fmt.Errorf("audit: tree: %w", err)
		}
	}
	t.markDurable()
	return nil
}

// lastLeaf is the newest leaf's hash; false for an empty tree.
func (t *tree) lastLeaf() (tlog.Hash, bool) { return t.last[0], t.n > 0 }

func (t *tree) close() error {
	if t == nil || t.f == nil {
		return nil
	}
	return t.f.Close()
}

// lineHashOf is the hash a line (without its newline) ends with, the zero
// hash when it ends in none (Verify reports such a line).
func lineHashOf(line []byte) [32]byte {
	h, _ := proof.ClaimedHash(line)
	return h
}

func hexHash(s string) ([32]byte, bool) {
	var h [32]byte
	_, err := hex.Decode(h[:], []byte(s))
	return h, err == nil && len(s) == hashHexLen
}

// syncTree brings the tree file in line with the log, whose last line on
// disk has hash last: at one with it, completed from the log's tail when
// it is short (a crash between the log's fsync and the tree's write), or
// rebuilt from the whole log when it disagrees.
func (w *Writer) syncTree(last string) error {
	t, err := openTree(w.dir)
	if err != nil {
		return err
	}
	w.tree = t
	want, logHas := hexHash(last)
	leaf, treeHas := t.lastLeaf()
	switch _, stale := os.Stat(filepath.Join(w.dir, treeStaleFile)); {
	case stale == nil:
		w.log.Warn("audit: audit verify found the tree file stale; rebuilding it from the log", "file", TreeFile)
	case !logHas && !treeHas, logHas && treeHas && leaf == proof.LeafHash(want):
		return nil
	case !treeHas:
		w.log.Info("audit: building the tree from the log", "file", TreeFile)
	case !logHas:
		w.log.Error("audit: the tree file has leaves but the log has no line; rebuilding it. Run audit verify", "treeLeaves", t.n)
	default:
		tail, found, err := w.tailAfter(leaf)
		if err != nil {
			return err
		}
		if found {
			for _, h := range tail {
				t.add(h)
			}
			t.markDurable()
			if err := t.write(); err != nil {
				return fmt.Errorf("audit: tree: %w", err)
			}
			w.log.Info("audit: tree completed from the log's tail", "leaves", len(tail), "size", t.n)
			return nil
		}
		w.log.Error("audit: the tree file disagrees with the log (its last leaf is no line near the log's end); rebuilding it. "+
			"Run audit verify: the log may have been edited or restored from an old copy", "treeLeaves", t.n)
	}
	return w.rebuildTree()
}

// maxTailScan bounds how far back from the log's end syncTree looks for
// the tree's last leaf before it rebuilds the tree instead.
const maxTailScan = 1 << 20

// tailAfter returns the hashes of the lines after the one whose leaf hash
// is leaf, reading the log from its end; found is false when that line is
// not within maxTailScan lines of it.
func (w *Writer) tailAfter(leaf tlog.Hash) (tail [][32]byte, found bool, err error) {
	files, err := allFiles(w.dir)
	if err != nil {
		return nil, false, err
	}
	for i := len(files) - 1; i >= 0 && len(tail) < maxTailScan; i-- {
		found, err := tailOf(files[i], leaf, &tail)
		if err != nil || found {
			reverse(tail)
			return tail, found, err
		}
	}
	return nil, false, nil
}

// tailOf appends to tail, last first, the hashes of path's lines after the
// one whose leaf hash is leaf, and says whether it found that line.
func tailOf(path string, leaf tlog.Hash, tail *[][32]byte) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("audit: %w", err)
	}
	b := newBackward(f, fi.Size())
	for len(*tail) < maxTailScan {
		_, line, err := b.prev()
		if err != nil || line == nil {
			return false, err
		}
		if line[len(line)-1] != '\n' {
			continue // torn: never a line of the chain
		}
		h := lineHashOf(line[:len(line)-1])
		if proof.LeafHash(h) == leaf {
			return true, nil
		}
		*tail = append(*tail, h)
	}
	return false, nil
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// treeStaleFile, when present, makes the next writer rebuild the tree:
// audit verify leaves it when the tree file disagrees with the log.
const treeStaleFile = "tree.stale"

// MarkTreeStale asks the next writer of dir to rebuild the tree file.
func MarkTreeStale(dir string) error {
	return os.WriteFile(filepath.Join(dir, treeStaleFile), nil, 0o600)
}

// rebuildTree writes the tree of the whole log beside the tree file and
// renames it over it.
func (w *Writer) rebuildTree() error {
	tmp := filepath.Join(w.dir, TreeFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	t := &tree{f: f}
	out := bufio.NewWriterSize(f, 1<<20)
	files, err := allFiles(w.dir)
	if err == nil {
		for _, path := range files {
			if err = forLines(path, func(line []byte) error {
				t.add(lineHashOf(line))
				_, err := out.Write(t.pending)
				t.pending = t.pending[:0]
				return err
			}); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = out.Flush()
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(w.dir, TreeFile))
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("audit: rebuilding the tree: %w", err)
	}
	w.tree.close()
	t.written = t.n
	t.markDurable()
	w.tree = t
	os.Remove(filepath.Join(w.dir, treeStaleFile))
	w.log.Info("audit: tree rebuilt from the log", "leaves", t.n)
	return nil
}

// forLines calls fn with each complete line of path, without its newline.
func forLines(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			return nil // a torn end is no line
		}
		if err != nil {
			return err
		}
		if err := fn(line[:len(line)-1]); err != nil {
			return err
		}
	}
}
