// Package capped bounds a tool's output streams: a Writer passes on at most
// a limit, counts what it drops, and ends with a visible marker saying so.
package capped

import (
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
