package audit

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// VerifyReport is the outcome of Verify. Bad is nil when the chain, the
// tree and the checkpoints are intact.
type VerifyReport struct {
	Files   int
	Entries int
	Last    string // hash of the last good line
	Bad     *BadLine
	// Checkpoints is how many checkpoint lines were checked, Signed whether
	// their signatures were (VerifyOptions.Keys), Covered the size of the
	// last: the entries after it no checkpoint covers yet.
	Checkpoints int
	Signed      bool
	Covered     int64
	// TreeStale says how the tree file disagrees with the log; the log is
	// not the worse for it (the file is derived from it), "" when it agrees.
	TreeStale string
}

// BadLine names the first place where the chain breaks.
type BadLine struct {
	File   string // base name
	Line   int    // 1-based
	Reason string
}

func (b *BadLine) Error() string { return fmt.Sprintf("%s:%d: %s", b.File, b.Line, b.Reason) }

// OK reports whether the whole chain verified.
func (r *VerifyReport) OK() bool { return r.Bad == nil }

// Verify is VerifyWith without keys: checkpoints' sizes and roots are
// checked, not their signatures.
func Verify(dir string) (*VerifyReport, error) { return VerifyWith(dir, VerifyOptions{}) }

// VerifyWith walks the rotated files in order, then audit.jsonl,
// recomputing every line's hash from the bytes on disk and checking each
// line links to the one before; it recomputes the tree from the lines,
// compares it with the tree file, and checks that every checkpoint line
// names the tree of the lines before it and is signed by one of opts.Keys.
// It stops at the first bad line or checkpoint. The error is for I/O only.
//
// A break in a live log is checked again before it is reported: tampering
// is on disk and shows the same break every time, a race with the writer
// would not.
func VerifyWith(dir string, opts VerifyOptions) (*VerifyReport, error) {
	rep, err := verifyOnce(dir, opts)
	for range 2 {
		if err != nil || rep.OK() {
			break
		}
		again, aerr := verifyOnce(dir, opts)
		if aerr != nil || again.OK() || *again.Bad == *rep.Bad {
			return again, aerr
		}
		rep = again
	}
	return rep, err
}

func verifyOnce(dir string, opts VerifyOptions) (*VerifyReport, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	head := ""
	if f, err := os.Open(filepath.Join(dir, HeadFile)); err == nil {
		head = readHead(f)
		f.Close()
	}
	// Open audit.jsonl before listing the rotated files: if the writer
	// rotates in between, the open file is among them, and the walk stops
	// there, so it sees one consistent chain (and the head) either way.
	cur, err := openLive(dir) // nil: rotated just before a crash
	if err != nil {
		return nil, err
	}
	if cur != nil {
		defer cur.Close()
	}
	rotated, curName, err := rotatedBefore(dir, cur)
	if err != nil {
		return nil, err
	}
	rep := &VerifyReport{Signed: opts.Keys != nil}
	ch := &chainWalk{rep: rep, last: make([]byte, 0, hashHexLen), seen: sortedSeen(opts.Seen)}
	if !opts.chainOnly {
		ch.tree = &tree{}
		if ch.file, err = openTreeCompare(dir); err != nil {
			return nil, err
		}
		defer ch.file.close()
	}
	defer func() { rep.Last = string(ch.last) }()
	seenHead := head == ""
	lastFile, lastLineNo := CurrentFile, 0
	// Lines are checked a block at a time on every core; only following
	// the links from line to line is sequential.
	blocks := make([]lineBlock, max(1, min(runtime.GOMAXPROCS(0), 8)))
	for i := range blocks {
		blocks[i].c, blocks[i].keys, blocks[i].chainOnly = newLinkChecker(), opts.Keys, opts.chainOnly
	}
	walk := func(name string, f *os.File) (bool, error) {
		rep.Files++
		lastFile, lastLineNo = name, 0
		br := blockReader{r: f}
		for {
			n, rerr := br.fillAll(blocks)
			checkBlocks(blocks[:n])
			for _, b := range blocks[:n] {
				for _, l := range b.links {
					lastLineNo++
					if reason := ch.follow(l); reason != "" {
						rep.Bad = &BadLine{File: lastFile, Line: lastLineNo, Reason: reason}
						return false, nil
					}
					seenHead = seenHead || string(ch.last) == head
				}
				ch.compareTree()
			}
			if rerr != nil {
				return false, fmt.Errorf("audit: %w", rerr)
			}
			if n < len(blocks) {
				return true, nil
			}
		}
	}
	for _, path := range rotated {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		ok, err := walk(filepath.Base(path), f)
		f.Close()
		if err != nil {
			return nil, err
		}
		if !ok {
			return rep, nil
		}
	}
	if cur != nil {
		if ok, err := walk(curName, cur); err != nil {
			return nil, err
		} else if !ok {
			return rep, nil
		}
	}
	if !seenHead {
		rep.Bad = &BadLine{File: lastFile, Line: lastLineNo + 1,
			Reason: fmt.Sprintf("entries missing at the end: the last committed line (hash %.12s…) is gone", head)}
	} else if reason := ch.end(); reason != "" {
		rep.Bad = &BadLine{File: lastFile, Line: lastLineNo + 1, Reason: reason}
	}
	return rep, nil
}

// blockSize is how much of a file a block of lines holds (more for a
// longer line).
const blockSize = 1 << 20

// lineBlock is whole lines of a file and, once checked, their links.
type lineBlock struct {
	buf   []byte
	c     *linkChecker
	keys  note.Verifiers // of checkpoints' signatures; nil: not checked
	links []lineLink
	// chainOnly: links alone, no leaves (VerifyOptions.chainOnly)
	chainOnly bool
}

// lineLink is one line checked on its own: its link and leaf, or what is
// wrong; a checkpoint line's checkpoint.
type lineLink struct {
	prev, hash []byte // in the block's buf
	leaf       tlog.Hash
	cp         *proof.Checkpoint
	reason     string
}

// check checks every line of b; each is read with its newline (only the
// last line of a file can lack it).
func (b *lineBlock) check() {
	b.links = b.links[:0]
	for rest := b.buf; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		if line[len(line)-1] != '\n' {
			b.links = append(b.links, lineLink{reason: "torn line: no trailing newline"})
			continue
		}
		prev, hash, typ, err := b.c.link(line[:len(line)-1])
		if err != nil {
			b.links = append(b.links, lineLink{reason: err.Error()})
			continue
		}
		l := lineLink{prev: prev, hash: hash}
		if b.chainOnly {
			b.links = append(b.links, l)
			continue
		}
		l.leaf = leafOfHex(hash)
		if typ == gateway.KindCheckpoint {
			l.cp, l.reason = checkCheckpointLine(line[:len(line)-1], b.keys)
		}
		b.links = append(b.links, l)
	}
}

func checkBlocks(blocks []lineBlock) {
	if len(blocks) == 1 {
		blocks[0].check()
		return
	}
	var wg sync.WaitGroup
	for i := range blocks {
		wg.Go(blocks[i].check)
	}
	wg.Wait()
}

// blockReader cuts a file into blocks of whole lines.
type blockReader struct {
	r     io.Reader
	carry []byte // the start of a line, read with the block before
	eof   bool
}

// fillAll fills blocks in turn and returns how many hold lines: fewer than
// all at the end of the file. With an error, the blocks before it.
func (br *blockReader) fillAll(blocks []lineBlock) (int, error) {
	for i := range blocks {
		if err := br.fill(&blocks[i]); err != nil {
			return i, err
		}
		if len(blocks[i].buf) == 0 {
			return i, nil
		}
	}
	return len(blocks), nil
}

// fill reads the next whole lines into b.buf, about blockSize bytes; at
// the end of the file, the last line even without its newline; none after.
func (br *blockReader) fill(b *lineBlock) error {
	buf := append(b.buf[:0], br.carry...)
	for !br.eof && (len(buf) < blockSize || bytes.LastIndexByte(buf, '\n') < 0) {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, blockSize)
		}
		n, err := br.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			br.eof = true
		} else if err != nil {
			return err
		}
	}
	br.carry = br.carry[:0]
	if !br.eof {
		i := bytes.LastIndexByte(buf, '\n')
		br.carry = append(br.carry, buf[i+1:]...)
		buf = buf[:i+1]
	}
	b.buf = buf
	return nil
}

// chainWalk follows the chain line by line, and grows the tree.
type chainWalk struct {
	rep  *VerifyReport
	last []byte // hash of the last good line
	tree *tree
	file *treeCompare
	seen []Seen // not yet reached, smallest first
}

// follow advances the chain by one checked line, or says why it cannot.
func (w *chainWalk) follow(l lineLink) string {
	if l.reason != "" {
		return l.reason
	}
	if !bytes.Equal(l.prev, w.last) {
		if len(w.last) == 0 {
			return "chain does not start here: prev should be empty (earlier lines or files removed?)"
		}
		return fmt.Sprintf("prev %.12s… does not match the previous line's hash %.12s…: a line was removed, inserted or reordered", l.prev, w.last)
	}
	if w.tree != nil {
		if reason := w.checkSeen(); reason != "" {
			return reason
		}
		if l.cp != nil {
			if reason := w.checkpoint(l.cp); reason != "" {
				return reason
			}
		}
		w.tree.addLeaf(l.leaf)
	}
	w.last = append(w.last[:0], l.hash...)
	w.rep.Entries++
	return ""
}
