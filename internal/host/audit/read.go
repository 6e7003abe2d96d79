package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Filter selects entries; empty fields match anything.
type Filter struct {
	Agent, Type, Decision, Tool, ID string
	Since                           time.Time
	// Has keeps only the lines holding these bytes, tested before a line
	// is decoded: a reader after a rare field of a long log (the labels
	// calls gave) decodes only the lines that may have it.
	Has string
}

// entry decodes a line the filter selects.
func (f *Filter) entry(line []byte) (*gateway.Entry, bool) {
	if f.Has != "" && !bytes.Contains(line, []byte(f.Has)) {
		return nil, false
	}
	var e gateway.Entry
	if json.Unmarshal(line, &e) != nil || !f.Match(&e) {
		return nil, false
	}
	return &e, true
}

// Match reports whether e passes the filter.
func (f *Filter) Match(e *gateway.Entry) bool {
	return (f.Agent == "" || e.Agent == f.Agent) &&
		(f.Type == "" || string(e.Type) == f.Type) &&
		(f.Decision == "" || e.Decision == f.Decision) &&
		(f.Tool == "" || e.Tool == f.Tool) &&
		(f.ID == "" || e.ID == f.ID) &&
		(f.Since.IsZero() || !e.TS.Before(f.Since))
}

// pollInterval is how often Tail looks for new lines when following.
var pollInterval = 200 * time.Millisecond

// Query calls fn for every matching entry, oldest first, across all files.
// Reading does not verify the chain (that is Verify's job); lines that do not
// parse are skipped.
func Query(dir string, f Filter, fn func(*gateway.Entry) error) error {
	// Open audit.jsonl before listing the rotated files: a rotation in
	// between puts it among them, and the walk stops there, so no file
	// falls between the list and the open.
	cur, err := openLive(dir)
	if err != nil {
		return err
	}
	if cur != nil {
		defer cur.Close()
	}
	rotated, _, err := rotatedBefore(dir, cur)
	if err != nil {
		return err
	}
	for _, path := range rotated {
		// A rotated file holds only entries older than its name's time.
		if t := rotationTime(path); !f.Since.IsZero() && t.Before(f.Since) {
			continue
		}
		if err := scanPath(path, &f, fn); err != nil {
			return err
		}
	}
	if cur == nil {
		return nil
	}
	_, err = scanFrom(cur, 0, &f, fn)
	return err
}

// Find returns the entries of one call id: its decision and, for an allowed
// call, its result.
func Find(dir, id string) ([]*gateway.Entry, error) {
	var out []*gateway.Entry
	err := Query(dir, Filter{ID: id}, func(e *gateway.Entry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// Tail calls fn for the last n matching entries, then, with follow, for
// each new matching entry as it is written, across rotations, until ctx
// ends. It reads the files from their end, so its memory grows with n, not
// with the log.
func Tail(ctx context.Context, dir string, f Filter, n int, follow bool, fn func(*gateway.Entry) error) error {
	if n < 0 {
		return fmt.Errorf("audit: tail of %d entries: the count must be 0 or more", n)
	}
	curPath := filepath.Join(dir, CurrentFile)
	cur, err := openLive(dir)
	if err != nil {
		return err
	}
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	var last []*gateway.Entry // newest first
	var off int64
	if cur != nil {
		if off, err = tailFile(cur, &f, n, &last); err != nil {
			return err
		}
	}
	// Older files, newest first, until n entries are found. Only files
	// older than cur: when cur was rotated after we opened it, it and any
	// newer file are followed after it below.
	rotated, _, err := rotatedBefore(dir, cur)
	if err != nil {
		return err
	}
	// seen is the newest rotated file whose entries come before cur's.
	seen := ""
	if len(rotated) > 0 {
		seen = rotated[len(rotated)-1]
	}
	for i := len(rotated) - 1; i >= 0 && len(last) < n; i-- {
		// A rotated file holds only entries older than its name's time, and
		// the files before it older still.
		if t := rotationTime(rotated[i]); !f.Since.IsZero() && t.Before(f.Since) {
			break
		}
		if err := tailPath(rotated[i], &f, n, &last); err != nil {
			return err
		}
	}
	for i := len(last) - 1; i >= 0; i-- {
		if err := fn(last[i]); err != nil {
			return err
		}
	}
	for follow {
		if cur != nil {
			if off, err = scanFrom(cur, off, &f, fn); err != nil {
				return err
			}
		}
		if !sameFile(cur, curPath) {
			if fi, serr := os.Stat(curPath); serr == nil && fi.Mode().IsRegular() {
				// Open the new file before listing, so a rotation in between
				// shows it among the rotated files, where the walk stops.
				next, err := os.Open(curPath)
				if err != nil {
					return fmt.Errorf("audit: %w", err)
				}
				if cur != nil { // rotated: drain what it got before the rename
					if _, err := scanFrom(cur, off, &f, fn); err != nil {
						next.Close()
						return err
					}
				}
				// Files rotated since cur (more than one rotation between
				// polls) hold entries that come before next's.
				rotated, _, err := rotatedBefore(dir, next)
				if err != nil {
					next.Close()
					return err
				}
				for _, p := range rotated {
					if p <= seen {
						continue
					}
					if !sameFile(cur, p) {
						if err := scanPath(p, &f, fn); err != nil {
							next.Close()
							return err
						}
					}
					seen = p
				}
				if cur != nil {
					cur.Close()
				}
				cur, off = next, 0
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pollInterval):
		}
	}
	return nil
}

// openLive opens audit.jsonl for a reader whose walk of the rotated files
// ends at it (nil: there is none). A rotation renames it before it creates
// the next; a reader in that moment finds none, and then nothing marks
// where its walk should end: a file rotated while it lists could be missed
// and newer ones read. So when rotated files exist a missing audit.jsonl
// is looked for again, for a few milliseconds (more means a log never
// written since a crash between the rename and the create).
func openLive(dir string) (*os.File, error) {
	path := filepath.Join(dir, CurrentFile)
	for try := 0; ; try++ {
		f, err := os.Open(path)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if try == 0 {
			if rotated, err := rotatedFiles(dir); err != nil || len(rotated) == 0 {
				return nil, err
			}
		}
		if try == 10 {
			return nil, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// rotatedBefore lists, in order, the rotated files whose entries come
// before those of cur, audit.jsonl as it was opened (nil: there was none),
// and names cur: its rotated name when the writer has rotated it since,
// else audit.jsonl. A directory listing can miss a file renamed while it
// runs; cur missed so would send a walk on into the files after it,
// skipping cur's place, so a listing without cur, once cur is no longer
// audit.jsonl, is made again. Files older than cur were renamed before cur
// was opened, and are always listed.
func rotatedBefore(dir string, cur *os.File) (before []string, curName string, err error) {
	for range 3 {
		rotated, err := rotatedFiles(dir)
		if err != nil {
			return nil, "", err
		}
		if i := slices.IndexFunc(rotated, func(p string) bool { return sameFile(cur, p) }); i >= 0 {
			return rotated[:i], filepath.Base(rotated[i]), nil
		}
		if cur == nil || sameFile(cur, filepath.Join(dir, CurrentFile)) {
			return rotated, CurrentFile, nil
		}
	}
	return nil, "", fmt.Errorf("audit: %s was renamed while being read and is not among the rotated files of %s", CurrentFile, dir)
}

func sameFile(f *os.File, path string) bool {
	if f == nil {
		return false
	}
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

func scanPath(path string, f *Filter, fn func(*gateway.Entry) error) error {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer file.Close()
	_, err = scanFrom(file, 0, f, fn)
	return err
}

func tailPath(path string, f *Filter, n int, last *[]*gateway.Entry) error {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer file.Close()
	_, err = tailFile(file, f, n, last)
	return err
}

// tailFile appends to last, newest first, the matching entries of file
// from its end until last holds n. It returns the offset after the file's
// last complete line: a line without its newline is being written (or was
// torn by a crash) and is not read, as scanFrom does not.
func tailFile(file *os.File, f *Filter, n int, last *[]*gateway.Entry) (int64, error) {
	fi, err := file.Stat()
	if err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	end := fi.Size()
	b := newBackward(file, end)
	for {
		start, line, err := b.prev()
		switch {
		case err != nil:
			return 0, err
		case line == nil:
			return end, nil
		case line[len(line)-1] != '\n': // only ever the last
			end = start
			continue
		case len(*last) >= n:
			return end, nil
		}
		if e, ok := f.entry(line); ok {
			*last = append(*last, e)
		}
	}
}

// backward reads the lines of a file before an offset, last first, a
// chunk at a time, so reading the end of a large file costs only its end.
type backward struct {
	r   io.ReaderAt
	pos int64  // the file offset of buf[0]
	buf []byte // the bytes from pos not yet returned
}

func newBackward(r io.ReaderAt, end int64) *backward { return &backward{r: r, pos: end} }

// prev returns the last line not yet returned (with its newline, if it has
// one) and its offset; a nil line when there is none left. A line returned
// stays valid: later reads go into new memory.
func (b *backward) prev() (int64, []byte, error) {
	for {
		// The newline that ends a line does not start it.
		if n := len(b.buf); n > 0 {
			if i := bytes.LastIndexByte(b.buf[:n-1], '\n'); i >= 0 {
				line := b.buf[i+1:]
				b.buf = b.buf[:i+1]
				return b.pos + int64(i) + 1, line, nil
			}
		}
		if b.pos == 0 {
			line := b.buf
			b.buf = nil
			return 0, line, nil
		}
		k := min(64<<10, b.pos)
		chunk := make([]byte, k+int64(len(b.buf)))
		if _, err := b.r.ReadAt(chunk[:k], b.pos-k); err != nil {
			return 0, nil, fmt.Errorf("audit: %w", err)
		}
		copy(chunk[k:], b.buf)
		b.pos, b.buf = b.pos-k, chunk
	}
}

// scanFrom reads the complete lines of file from off and returns the offset
// after the last complete one, so a line being written is read next time.
func scanFrom(file *os.File, off int64, f *Filter, fn func(*gateway.Entry) error) (int64, error) {
	return scanLines(file, off, func(line []byte, _ int64) error {
		if e, ok := f.entry(line); ok {
			return fn(e)
		}
		return nil
	})
}

// scanLines calls fn with each complete line of file from off and the
// offset after it; it returns the offset after the last complete line.
func scanLines(file *os.File, off int64, fn func(line []byte, end int64) error) (int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(file, off, math.MaxInt64-off), 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, fmt.Errorf("audit: %w", err)
		}
		off += int64(len(line))
		if err := fn(line, off); err != nil {
			return off, err
		}
	}
}
