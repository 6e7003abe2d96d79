package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// VerifyReport is the outcome of Verify. Bad is nil when the chain is intact.
type VerifyReport struct {
	Files   int
	Entries int
	Last    string // hash of the last good line
	Bad     *BadLine
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

// Verify walks the rotated files in order, then audit.jsonl, recomputing every
// line's hash from the bytes on disk and checking each line links to the one
// before. It stops at the first bad line. The error is for I/O only.
//
// A directory listing is no snapshot: a file the live writer renames during
// the listing can be missed, which reads as a removed file. So a break is
// checked again; tampering is on disk and shows the same break every time,
// a race does not.
func Verify(dir string) (*VerifyReport, error) {
	rep, err := verifyOnce(dir)
	for range 2 {
		if err != nil || rep.OK() {
			break
		}
		again, aerr := verifyOnce(dir)
		if aerr != nil || again.OK() || *again.Bad == *rep.Bad {
			return again, aerr
		}
		rep = again
	}
	return rep, err
}

func verifyOnce(dir string) (*VerifyReport, error) {
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
	cur, err := os.Open(filepath.Join(dir, CurrentFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) { // missing: rotated just before a crash
		return nil, fmt.Errorf("audit: %w", err)
	}
	if cur != nil {
		defer cur.Close()
	}
	rotated, err := rotatedFiles(dir)
	if err != nil {
		return nil, err
	}
	rep := &VerifyReport{}
	ch := &chainWalk{rep: rep, c: newLinkChecker(), last: make([]byte, 0, hashHexLen)}
	defer func() { rep.Last = string(ch.last) }()
	seenHead := head == ""
	lastFile, lastLineNo := CurrentFile, 0
	// Large reads: verifying is a pass over the whole log.
	r := bufio.NewReaderSize(nil, 1<<20)
	var long []byte
	walk := func(name string, f *os.File) (bool, error) {
		rep.Files++
		lastFile, lastLineNo = name, 0
		r.Reset(f)
		for {
			line, err := readLine(r, &long)
			if len(line) == 0 && err == io.EOF {
				return true, nil
			}
			if err != nil && err != io.EOF {
				return false, fmt.Errorf("audit: %w", err)
			}
			lastLineNo++
			if reason := ch.check(line); reason != "" {
				rep.Bad = &BadLine{File: lastFile, Line: lastLineNo, Reason: reason}
				return false, nil
			}
			seenHead = seenHead || string(ch.last) == head
		}
	}
	curName := CurrentFile
	for _, path := range rotated {
		if sameFile(cur, path) { // rotated since we opened it
			curName = filepath.Base(path)
			break
		}
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
	}
	return rep, nil
}

// readLine reads the next line with its newline (without one at the end
// of the file), like ReadBytes, but into r's buffer, or into *long when the
// line is longer than that; it is valid until the next read.
func readLine(r *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	*long = append((*long)[:0], line...)
	for err == bufio.ErrBufferFull {
		line, err = r.ReadSlice('\n')
		*long = append(*long, line...)
	}
	return *long, err
}

// chainWalk follows the chain line by line.
type chainWalk struct {
	rep  *VerifyReport
	c    *linkChecker
	last []byte // hash of the last good line
}

// check verifies one line read with its newline and advances the chain.
func (w *chainWalk) check(line []byte) string {
	if line[len(line)-1] != '\n' {
		return "torn line: no trailing newline"
	}
	prev, hash, err := w.c.link(line[:len(line)-1])
	if err != nil {
		return err.Error()
	}
	if !bytes.Equal(prev, w.last) {
		if len(w.last) == 0 {
			return "chain does not start here: prev should be empty (earlier lines or files removed?)"
		}
		return fmt.Sprintf("prev %.12s… does not match the previous line's hash %.12s…: a line was removed, inserted or reordered", prev, w.last)
	}
	w.last = append(w.last[:0], hash...)
	w.rep.Entries++
	return ""
}
