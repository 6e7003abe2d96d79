package proto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
)

// The plugin call as the launcher sends it on the agent socket
// (docs/protocol.md, "The launcher"): a header, then stdin frames, NDJSON.

// maxHint bounds the correlation hints: they are ids, not documents.
const maxHint = 256

// CallHeader is the JSON body of a call, or the first frame of an NDJSON
// request. Session, Parent and Cwd are hints: they are recorded and passed
// to the tool, never used for identity.
type CallHeader struct {
	Argv    []string `json:"argv"`
	Cwd     string   `json:"cwd,omitempty"`
	Session string   `json:"session,omitempty"`
	Parent  string   `json:"parent,omitempty"`
}

// InFrame is a request frame after the header: stdin bytes or the end of stdin.
type InFrame struct {
	Stdin []byte `json:"stdin,omitempty"`
	EOF   bool   `json:"eof,omitempty"`
}

// Errors of request parsing; the handler maps them to statuses.
var (
	ErrTooLarge  = errors.New("too large")
	ErrMalformed = errors.New("malformed")
)

// ParseCallHeader decodes and checks a call header. workspace is where cwd must
// lie (as the sandbox sees it); a header refused for its cwd is returned
// with the error, so the refusal can be recorded with its arguments.
func ParseCallHeader(b []byte, workspace string) (*CallHeader, error) {
	var h CallHeader
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: call header: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: call header: trailing data after the JSON object", ErrMalformed)
	}
	if len(h.Session) > maxHint || len(h.Parent) > maxHint {
		return nil, fmt.Errorf("%w: session and parent are at most %d bytes", ErrMalformed, maxHint)
	}
	if h.Cwd != "" && !Within(h.Cwd, workspace) {
		return &h, fmt.Errorf("%w: cwd %q is outside the workspace %s", ErrCwd, h.Cwd, workspace)
	}
	return &h, nil
}

// ErrCwd marks a well-formed header the gateway refuses (and records).
var ErrCwd = errors.New("cwd refused")

// Within reports whether p is an absolute path at or below dir once cleaned.
func Within(p, dir string) bool {
	if !path.IsAbs(p) {
		return false
	}
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/'
}

// Args is the tool's argument document: argv and cwd, nothing else.
func (h *CallHeader) Args() json.RawMessage {
	argv := h.Argv
	if argv == nil {
		argv = []string{}
	}
	b, _ := json.Marshal(struct {
		Argv []string `json:"argv"`
		Cwd  string   `json:"cwd,omitempty"`
	}{argv, h.Cwd})
	return b
}

// ReadLine returns the next NDJSON line of a request without its newline, at most max
// bytes; io.EOF only when no bytes are left. A last line without a newline
// counts.
func ReadLine(r *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > max+1 { // +1: the newline
			return nil, fmt.Errorf("%w: frame over the limit of %d bytes", ErrTooLarge, max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// StdinReader turns the frames after the header into the call's stdin.
type StdinReader struct {
	r   *bufio.Reader
	max int64
	buf []byte
	eof bool
}

// NewStdinReader reads stdin frames from r (positioned after the header).
func NewStdinReader(r *bufio.Reader, max int64) *StdinReader {
	return &StdinReader{r: r, max: max}
}

// Read implements io.Reader. The stream must end with an eof frame; a body
// that ends without one is io.ErrUnexpectedEOF (the client went away).
func (s *StdinReader) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.eof {
			return 0, io.EOF
		}
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// WriteTo implements io.WriterTo: each frame's bytes go to w as decoded,
// with no buffer between (io.Copy's own is 32 KiB, made per call).
func (s *StdinReader) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for {
		if len(s.buf) > 0 {
			k, err := w.Write(s.buf)
			n += int64(k)
			s.buf = s.buf[k:]
			if err != nil {
				return n, err
			}
			continue
		}
		if s.eof {
			return n, nil
		}
		if err := s.next(); err != nil {
			return n, err
		}
	}
}

// next reads the next frame; a body that ends before the eof frame is
// io.ErrUnexpectedEOF.
func (s *StdinReader) next() error {
	for {
		line, err := ReadLine(s.r, s.max)
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var f InFrame
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("%w: stdin frame: %v", ErrMalformed, err)
		}
		s.buf, s.eof = f.Stdin, f.EOF
		return nil
	}
}
