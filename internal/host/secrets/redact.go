package secrets

import (
	"io"
	"strings"
)

// Writer redacts secret values from a stream on its way to w, also when a
// value is split across writes: it holds back the shortest tail that could
// still become a value, so output is delayed only while it looks like one.
// Flush writes the held-back tail at the end of the stream.
type Writer struct {
	w       io.Writer
	values  []string // longest first
	pending []byte
	err     error
}

// NewWriter returns a redacting writer, or w itself when s holds no secrets.
func (s *Store) NewWriter(w io.Writer) io.Writer {
	if s == nil || len(s.values) == 0 {
		return w
	}
	return &Writer{w: w, values: s.values}
}

// Write accepts all of p; an error of the underlying writer is returned
// and sticks.
func (r *Writer) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	r.pending = append(r.pending, p...)
	buf := string(r.pending)
	cut := len(buf) - r.hold(buf)
	var out strings.Builder
	pos := 0
	for {
		start, n := r.next(buf[pos:])
		if start < 0 || pos+start >= cut {
			break
		}
		out.WriteString(buf[pos : pos+start])
		out.WriteString(Redacted)
		pos += start + n
	}
	if pos < cut {
		out.WriteString(buf[pos:cut])
		pos = cut
	}
	r.pending = append(r.pending[:0], buf[pos:]...)
	if out.Len() > 0 {
		_, r.err = io.WriteString(r.w, out.String())
	}
	return len(p), r.err
}

// Flush redacts and writes what is held back.
func (r *Writer) Flush() error {
	if r.err != nil || len(r.pending) == 0 {
		return r.err
	}
	buf := string(r.pending)
	r.pending = r.pending[:0]
	var out strings.Builder
	for {
		start, n := r.next(buf)
		if start < 0 {
			break
		}
		out.WriteString(buf[:start])
		out.WriteString(Redacted)
		buf = buf[start+n:]
	}
	out.WriteString(buf)
	_, r.err = io.WriteString(r.w, out.String())
	return r.err
}

// next finds the earliest value in s, the longest at that position.
func (r *Writer) next(s string) (start, n int) {
	start = -1
	for _, v := range r.values {
		if i := strings.Index(s, v); i >= 0 && (start < 0 || i < start) {
			start, n = i, len(v)
		}
	}
	return start, n
}

// hold is the length of the longest tail of s that is a proper prefix of a
// value: those bytes may yet turn into a secret.
func (r *Writer) hold(s string) int {
	h := 0
	for _, v := range r.values {
		for k := min(len(v)-1, len(s)); k > h; k-- {
			if strings.HasSuffix(s, v[:k]) {
				h = k
				break
			}
		}
	}
	return h
}
