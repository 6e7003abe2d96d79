package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/internal/gateway"
)

// Filter selects entries; empty fields match anything.
type Filter struct {
	Agent, Type, Decision, Tool, ID string
	Since                           time.Time
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
	cur, err := os.Open(filepath.Join(dir, CurrentFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit: %w", err)
	}
	if cur != nil {
		defer cur.Close()
	}
	rotated, err := rotatedFiles(dir)
	if err != nil {
		return err
	}
	for _, path := range rotated {
		if sameFile(cur, path) {
			break
		}
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

// Tail calls fn for the last n matching entries (all when n < 0), then, with
// follow, for each new matching entry as it is written, across rotations,
// until ctx ends.
func Tail(ctx context.Context, dir string, f Filter, n int, follow bool, fn func(*gateway.Entry) error) error {
	curPath := filepath.Join(dir, CurrentFile)
	cur, err := os.Open(curPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit: %w", err)
	}
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	var last []*gateway.Entry
	collect := func(e *gateway.Entry) error { last = append(last, e); return nil }
	var off int64
	if cur != nil {
		if off, err = scanFrom(cur, 0, &f, collect); err != nil {
			return err
		}
	}
	last = lastN(last, n)
	// Older files, newest first, until n entries are found.
	rotated, err := rotatedFiles(dir)
	if err != nil {
		return err
	}
	// Only files older than cur: when cur was rotated after we opened it, it
	// and any newer file are in the list, and are followed after it below.
	for i, p := range rotated {
		if sameFile(cur, p) {
			rotated = rotated[:i]
			break
		}
	}
	// seen is the newest rotated file whose entries come before cur's.
	seen := ""
	if len(rotated) > 0 {
		seen = rotated[len(rotated)-1]
	}
	for i := len(rotated) - 1; i >= 0 && (n < 0 || len(last) < n); i-- {
		newer := last
		last = nil
		if err := scanPath(rotated[i], &f, collect); err != nil {
			return err
		}
		last = append(lastN(last, n-len(newer)), newer...)
	}
	for _, e := range last {
		if err := fn(e); err != nil {
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
				rotated, err := rotatedFiles(dir)
				if err != nil {
					next.Close()
					return err
				}
				for _, p := range rotated {
					if sameFile(next, p) {
						break
					}
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

func lastN(es []*gateway.Entry, n int) []*gateway.Entry {
	if n >= 0 && len(es) > n {
		return es[len(es)-n:]
	}
	return es
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

// scanFrom reads the complete lines of file from off and returns the offset
// after the last complete one, so a line being written is read next time.
func scanFrom(file *os.File, off int64, f *Filter, fn func(*gateway.Entry) error) (int64, error) {
	return scanLines(file, off, func(line []byte, _ int64) error {
		var e gateway.Entry
		if json.Unmarshal(line, &e) != nil || !f.Match(&e) {
			return nil
		}
		return fn(&e)
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
