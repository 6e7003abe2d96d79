package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Position is a point in the log: the end of the line whose hash is Hash, at
// byte Offset of the file holding it. Rotation renames the file but keeps
// its bytes, so a Position stays valid; a reader resumes after it without
// reading what lies before. The zero Position is before the first line.
type Position struct {
	Offset int64  `json:"offset"`
	Hash   string `json:"hash"`
}

// ErrPositionNotFound: no file of the log has the line a Position names
// (the files were removed, or the position is from another log).
var ErrPositionNotFound = errors.New("audit: position not found in the log")

// Position returns the end of the last durable line: every entry whose
// Append has returned lies at or before it.
func (w *Writer) Position() Position { return *w.pos.Load() }

func (w *Writer) setPosition(off int64, hash string) {
	w.pos.Store(&Position{Offset: off, Hash: hash})
}

// ScanAfter calls fn for every entry after pos, oldest first. Finding pos
// costs one small read per file, newest first.
func ScanAfter(dir string, pos Position, fn func(*gateway.Entry) error) error {
	return ScanLinesAfter(dir, pos, func(e *gateway.Entry, _ []byte, _ Position) error { return fn(e) })
}

// ScanLinesAfter is ScanAfter that also gives each entry's line as written
// and the Position after it, so a follower (the index) can resume there.
//
// A directory listing is no snapshot: the writer may rotate audit.jsonl
// away between the listing and its open, and the file opened under that
// name is then the new one. An entry whose prev is not the hash delivered
// before it shows that; the scan lists again and resumes after the last
// entry it delivered. A break that is still there on the second look is on
// disk (audit verify's to report) and is read through.
func ScanLinesAfter(dir string, pos Position, fn func(e *gateway.Entry, line []byte, end Position) error) error {
	var retried Position
	for {
		err := scanLinesAfter(dir, &pos, retried, fn)
		if !errors.Is(err, errStaleListing) {
			return err
		}
		retried = pos
	}
}

// errStaleListing: the files changed under a scan (see ScanLinesAfter).
var errStaleListing = errors.New("audit: the log rotated during the scan")

// scanLinesAfter scans once, advancing *pos past every entry delivered. A
// link break right after *pos == accept is read through, not retried.
func scanLinesAfter(dir string, pos *Position, accept Position, fn func(e *gateway.Entry, line []byte, end Position) error) error {
	files, err := allFiles(dir)
	if err != nil {
		return err
	}
	start, off := -1, int64(0)
	if pos.Hash == "" && pos.Offset == 0 {
		start = 0
	} else {
		want := []byte(hashKey + pos.Hash + "\"}\n")
		for i := len(files) - 1; i >= 0 && start < 0; i-- {
			found, err := endsWith(files[i], pos.Offset, want)
			if err != nil {
				return err
			}
			if found {
				start, off = i, pos.Offset
			}
		}
	}
	if start < 0 {
		return ErrPositionNotFound
	}
	for _, path := range files[start:] {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		_, err = scanLines(f, off, func(line []byte, end int64) error {
			var e gateway.Entry
			if json.Unmarshal(line, &e) != nil {
				return nil
			}
			if pos.Hash != "" && e.Prev != pos.Hash && *pos != accept {
				return errStaleListing
			}
			if err := fn(&e, line, Position{Offset: end, Hash: e.Hash}); err != nil {
				return err
			}
			*pos = Position{Offset: end, Hash: e.Hash}
			return nil
		})
		f.Close()
		if err != nil {
			return err
		}
		off = 0
	}
	return nil
}

// endsWith reports whether the bytes of path before offset end with want.
func endsWith(path string, offset int64, want []byte) (bool, error) {
	if offset < int64(len(want)) {
		return false, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	got := make([]byte, len(want))
	if n, _ := f.ReadAt(got, offset-int64(len(want))); n < len(got) {
		return false, nil
	}
	return bytes.Equal(got, want), nil
}

// Progress is how far a follower of the log (the index, the fleet copy)
// has come: the position it last reached and when. Safe for concurrent use.
type Progress struct {
	last atomic.Pointer[reached]
}

type reached struct {
	pos Position
	at  time.Time
}

// Reached records that the follower is at pos now.
func (p *Progress) Reached(pos Position) { p.last.Store(&reached{pos: pos, at: time.Now()}) }

// Lag is how long the follower has been behind a log whose last durable
// line is at head: zero when it has reached head, else the time since it
// last caught up (MaxInt64 before it ever did).
func (p *Progress) Lag(head Position) time.Duration {
	r := p.last.Load()
	switch {
	case r == nil:
		return time.Duration(math.MaxInt64)
	case r.pos == head:
		return 0
	}
	return time.Since(r.at)
}
