// Package sse reads server-sent events: the streams of the model door (and
// the providers behind it) and of the MCP door. It imports nothing of ours,
// so the in-sandbox MCP bridge and the host's agent loop read them with the
// same code.
package sse

import (
	"bufio"
	"bytes"
	"io"
)

// Read calls fn with the type ("" when the event has no event: field) and
// the data of each event of r, its data: lines joined by \n; data is fn's
// only for the call. A line longer than maxLine is an error. A last event
// without its blank line is passed on when the stream ends, but not the
// part of one that a broken read leaves: it returns the read's error.
func Read(r io.Reader, maxLine int, fn func(event string, data []byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, min(64<<10, maxLine)), maxLine)
	var event string
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				fn(event, data)
			}
			event, data = "", data[:0]
		case bytes.HasPrefix(line, []byte("event:")):
			event = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(line[len("data:"):], []byte(" "))...)
		}
	}
	// The scanner hands over the part of a line it holds on any read error,
	// not only at the end.
	if len(data) > 0 && sc.Err() == nil {
		fn(event, data)
	}
	return sc.Err()
}
