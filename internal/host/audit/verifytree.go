package audit

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// VerifyOptions are what VerifyWith checks the log against beyond itself.
type VerifyOptions struct {
	// Keys check the checkpoints' signatures (every key the gateway has
	// had: one of them must sign each); nil checks sizes and roots only.
	Keys note.Verifiers
	// Seen are checkpoints of this log kept elsewhere (a receipt's, a
	// copy off the host): the log must hold the tree each names. That
	// catches a log restored from an old copy, or rewritten and re-signed
	// with the key, which the log alone cannot show.
	Seen []Seen
	// chainOnly checks the chain alone: the benchmarks' baseline, verify
	// as it was before the tree.
	chainOnly bool
}

// Seen is a checkpoint from elsewhere, From naming where.
type Seen struct {
	Checkpoint proof.Checkpoint
	From       string
}

func sortedSeen(seen []Seen) []Seen {
	out := slices.Clone(seen)
	slices.SortStableFunc(out, func(a, b Seen) int { return int(a.Checkpoint.Size - b.Checkpoint.Size) })
	return out
}

// leafOfHex is the leaf of a line whose (checked) hash is hexHash.
func leafOfHex(hexHash []byte) tlog.Hash {
	var h [32]byte
	_, _ = hex.Decode(h[:], hexHash)
	return proof.LeafHash(h)
}

// checkCheckpointLine reads a checkpoint line's checkpoint and, with keys,
// checks its signature; its size and root are the walk's to check.
func checkCheckpointLine(line []byte, keys note.Verifiers) (*proof.Checkpoint, string) {
	var e struct {
		Detail struct {
			Note string    `json:"note"`
			Size int64     `json:"size"`
			Root tlog.Hash `json:"root"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return nil, "checkpoint: detail unreadable: " + err.Error()
	}
	msg := []byte(e.Detail.Note)
	var cp proof.Checkpoint
	var err error
	if keys != nil {
		cp, _, err = proof.OpenCheckpoint(msg, keys)
	} else {
		cp, err = unverifiedCheckpoint(msg)
	}
	if err != nil {
		return nil, err.Error()
	}
	if cp.Size != e.Detail.Size || cp.Root != e.Detail.Root {
		return nil, fmt.Sprintf("checkpoint: its detail says size %d root %s, its signed note size %d root %s", e.Detail.Size, e.Detail.Root, cp.Size, cp.Root)
	}
	return &cp, ""
}

// unverifiedCheckpoint reads a signed checkpoint without checking who
// signed it.
func unverifiedCheckpoint(msg []byte) (proof.Checkpoint, error) {
	_, err := note.Open(msg, nil)
	var unverified *note.UnverifiedNoteError
	if !errors.As(err, &unverified) {
		return proof.Checkpoint{}, fmt.Errorf("checkpoint: not a signed note: %v", err)
	}
	return proof.ParseCheckpoint(unverified.Note.Text)
}

// checkpoint checks a checkpoint line against the tree of the lines before it.
func (w *chainWalk) checkpoint(cp *proof.Checkpoint) string {
	switch {
	case cp.Size != w.tree.n:
		return fmt.Sprintf("checkpoint: size %d, but %d entries precede it: entries were removed or inserted before it", cp.Size, w.tree.n)
	case cp.Root != w.tree.root():
		return fmt.Sprintf("checkpoint: root %s is not the tree of the %d entries before it: an entry before it was changed since it was signed", cp.Root, cp.Size)
	}
	w.rep.Checkpoints++
	w.rep.Covered = cp.Size
	return ""
}

// checkSeen compares the tree with the seen checkpoints of its size.
func (w *chainWalk) checkSeen() string {
	for len(w.seen) > 0 && w.seen[0].Checkpoint.Size <= w.tree.n {
		s := w.seen[0]
		w.seen = w.seen[1:]
		if s.Checkpoint.Size == w.tree.n && s.Checkpoint.Root != w.tree.root() {
			return fmt.Sprintf("the log's first %d entries are not the tree of the checkpoint from %s (root %s): its history was rewritten after that was signed",
				w.tree.n, s.From, s.Checkpoint.Root)
		}
	}
	return ""
}

// end checks, after the last line, the seen checkpoints not yet reached.
func (w *chainWalk) end() string {
	if w.tree == nil {
		return ""
	}
	if reason := w.checkSeen(); reason != "" {
		return reason
	}
	if len(w.seen) > 0 {
		s := w.seen[len(w.seen)-1]
		return fmt.Sprintf("the checkpoint from %s covers %d entries, the log holds %d: entries were removed at its end, or it was restored from an old copy",
			s.From, s.Checkpoint.Size, w.tree.n)
	}
	return ""
}

// treeCompare reads the tree file along the walk.
type treeCompare struct {
	f    *os.File // nil: there is none
	r    *bufio.Reader
	buf  []byte
	at   int64 // stored hashes compared so far
	done bool  // stale, or read to its end
}

func openTreeCompare(dir string) (*treeCompare, error) {
	f, err := os.Open(filepath.Join(dir, TreeFile))
	if errors.Is(err, os.ErrNotExist) {
		return &treeCompare{done: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &treeCompare{f: f, r: bufio.NewReaderSize(f, 1<<20)}, nil
}

func (c *treeCompare) close() {
	if c.f != nil {
		c.f.Close()
	}
}

// compareTree compares the stored hashes of the leaves added since the
// last call with the tree file's. A file that ends early is not stale: a
// live writer writes it just after the log; the next Open completes it.
func (w *chainWalk) compareTree() {
	t, c := w.tree, w.file
	if t == nil {
		return
	}
	defer func() { t.pending = t.pending[:0] }()
	if c.done || len(t.pending) == 0 {
		return
	}
	c.buf = slices.Grow(c.buf[:0], len(t.pending))[:len(t.pending)]
	n, err := io.ReadFull(c.r, c.buf)
	if err != nil {
		c.done = true
	}
	if i := firstDiff(c.buf[:n], t.pending[:n]); i >= 0 {
		level, k := tlog.SplitStoredHashIndex(c.at + int64(i)/tlog.HashSize)
		w.rep.TreeStale = fmt.Sprintf("%s disagrees with the log from leaf %d on", TreeFile, k<<level)
		c.done = true
	}
	c.at += int64(n) / tlog.HashSize
}

// firstDiff is the offset of the first byte where a and b differ, -1 for none.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
