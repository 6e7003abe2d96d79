// Package sse reads server-sent events: the streams of the model door (and
// the providers behind it) and of the MCP door. It imports nothing of ours,
// so the in-sandbox MCP bridge, the host's model door and its agent loop
// read them with the same code.
package sse

import (
	"bytes"
	"errors"
	"io"
)

// ErrTooLong is Read's error for an event whose line or data outgrew the
// bound.
var ErrTooLong = errors.New("sse: event longer than the bound")

// Parser reads the events of the bytes written to it, as they pass: the
// door tees a provider's stream into one on its way to the client, so
// Write never fails and never holds the stream back. An event whose line
// or data outgrows max is skipped whole (Skipped says so); what it holds
// stays within max.
//
// Lines end with \n or \r\n; a blank line ends an event; a line's field is
// what precedes its first colon, its value what follows (one space
// dropped); data lines join with \n; fields other than event and data,
// and comments, are ignored.
type Parser struct {
	max     int
	fn      func(event string, data []byte)
	line    []byte // the current line, up to max
	long    bool   // the current line outgrew max and is skipped
	event   string // the current event's "event:" field
	data    []byte // the current event's data lines, joined by \n
	skip    bool   // the current event outgrew max
	skipped bool   // some event outgrew max
}

// NewParser calls fn with the type ("" when the event has no event: field)
// and the data of each event with data; data is fn's only for the call.
func NewParser(max int, fn func(event string, data []byte)) *Parser {
	return &Parser{max: max, fn: fn}
}

// Write consumes the next bytes of the stream.
func (p *Parser) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.appendLine(b)
			break
		}
		p.appendLine(b[:i])
		b = b[i+1:]
		p.endLine()
	}
	return n, nil
}

// Close ends the stream: an event not closed by a blank line is passed on
// too.
func (p *Parser) Close() error {
	if len(p.line) > 0 || p.long {
		p.endLine()
	}
	p.dispatch()
	return nil
}

// Skipped reports whether an event outgrew the bound and was not passed on.
func (p *Parser) Skipped() bool { return p.skipped }

func (p *Parser) appendLine(b []byte) {
	if p.long {
		return
	}
	if len(p.line)+len(b) > p.max {
		p.long, p.line = true, p.line[:0]
		return
	}
	p.line = append(p.line, b...)
}

func (p *Parser) endLine() {
	line := bytes.TrimSuffix(p.line, []byte("\r"))
	long := p.long
	p.line, p.long = p.line[:0], false
	if long {
		p.skip = true
		return
	}
	if len(line) == 0 {
		p.dispatch()
		return
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		p.event = string(value)
	case "data":
		if p.skip {
			return
		}
		if len(p.data)+len(value)+1 > p.max {
			p.skip, p.data = true, p.data[:0]
			return
		}
		if len(p.data) > 0 {
			p.data = append(p.data, '\n')
		}
		p.data = append(p.data, value...)
	}
}

func (p *Parser) dispatch() {
	event, data, skip := p.event, p.data, p.skip
	p.event, p.data, p.skip = "", p.data[:0], false
	if skip {
		p.skipped = true
		return
	}
	if len(data) > 0 {
		p.fn(event, data)
	}
}

// Read calls fn with each event of r as NewParser does, and stops with
// ErrTooLong at the first event over max. A last event without its blank
// line is passed on when the stream ends, but not the part of one that a
// broken read leaves: it returns the read's error.
func Read(r io.Reader, max int, fn func(event string, data []byte)) error {
	p := NewParser(max, fn)
	buf := make([]byte, min(32<<10, max+1))
	for {
		n, err := r.Read(buf)
		_, _ = p.Write(buf[:n])
		if p.skipped || p.long || p.skip {
			return ErrTooLong
		}
		if errors.Is(err, io.EOF) {
			p.Close()
			if p.skipped {
				return ErrTooLong
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}
