// Package capped bounds a tool's output streams: a Writer passes on at most
// a limit, counts what it drops, and ends with a visible marker saying so.
package capped

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// Marker ends a stream that was cut; %d is the number of bytes dropped.
const Marker = "\n…[toolgate: output truncated, %d bytes dropped]"

// Writer passes on at most limit bytes and counts the rest. It never fails
// a write, so the process behind it keeps running and its pipe keeps
// draining after the cap, or after the caller went away.
type Writer struct {
	w       io.Writer
	limit   int64
	mu      *sync.Mutex
	n       int64 // bytes passed on
	dropped int64
	err     error // first error of w; nothing more is passed on after it
}

// NewWriter caps w at limit bytes. Writers that share one sink (stdout and
// stderr framed onto one connection) share mu; nil gives the writer its own.
func NewWriter(w io.Writer, limit int64, mu *sync.Mutex) *Writer {
	if mu == nil {
		mu = new(sync.Mutex)
	}
	return &Writer{w: w, limit: limit, mu: mu}
}

func (c *Writer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := min(int64(len(p)), max(c.limit-c.n, 0))
	c.dropped += int64(len(p)) - keep
	if keep > 0 && c.err == nil {
		_, c.err = c.w.Write(p[:keep])
	}
	c.n += keep
	return len(p), nil
}

// Finish appends the marker when bytes were dropped.
func (c *Writer) Finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped > 0 && c.err == nil {
		_, c.err = fmt.Fprintf(c.w, Marker, c.dropped)
	}
}

// Dropped is the number of bytes cut so far.
func (c *Writer) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// Err is the first error of the underlying writer, nil while it works.
func (c *Writer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Streams caps a call's stdout and stderr at limit bytes each. Given both
// of the caller's streams it writes through to them — which may be one
// writer, so the two share a mutex; given fewer, it keeps both in memory for
// the call's result, so the output lands whole in one place and is never
// split between a stream and the result.
type Streams struct {
	Stdout, Stderr *Writer
	outBuf, errBuf *bytes.Buffer // nil when writing through
}

// NewStreams caps stdout and stderr (either nil: both kept in memory).
func NewStreams(stdout, stderr io.Writer, limit int64) *Streams {
	s := &Streams{}
	if stdout == nil || stderr == nil {
		s.outBuf, s.errBuf = new(bytes.Buffer), new(bytes.Buffer)
		stdout, stderr = s.outBuf, s.errBuf
	}
	mu := new(sync.Mutex)
	s.Stdout, s.Stderr = NewWriter(stdout, limit, mu), NewWriter(stderr, limit, mu)
	return s
}

// Finish ends each stream that was cut with the marker.
func (s *Streams) Finish() {
	s.Stdout.Finish()
	s.Stderr.Finish()
}

// Truncated reports whether either stream was cut.
func (s *Streams) Truncated() bool { return s.Stdout.Dropped() > 0 || s.Stderr.Dropped() > 0 }

// Err is the first failure of the caller's streams, nil while they work.
func (s *Streams) Err() error {
	if err := s.Stdout.Err(); err != nil {
		return err
	}
	return s.Stderr.Err()
}

// Kept returns the output kept in memory; ok is false when it was written
// through to the caller's streams instead.
func (s *Streams) Kept() (stdout, stderr string, ok bool) {
	if s.outBuf == nil {
		return "", "", false
	}
	return s.outBuf.String(), s.errBuf.String(), true
}
