package proto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestWithin(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		p    string
		want bool
	}{
		{"/workspace", true}, {"/workspace/", true}, {"/workspace/a/../b", true},
		{"/workspace/..", false}, {"/workspacex", false}, {"workspace", false}, {"/", false}, {"/etc", false},
	} {
		if got := Within(tt.p, "/workspace"); got != tt.want {
			t.Errorf("Within(%q) = %v", tt.p, got)
		}
	}
}

func TestStdinReader(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, in, out string
		err           error
	}{
		{"frames", "{\"stdin\":\"YQ==\"}\n\n{\"stdin\":\"Yg==\"}\n{\"eof\":true}\n", "ab", nil},
		{"last line without newline", "{\"stdin\":\"YQ==\"}\n{\"eof\":true}", "a", nil},
		{"no eof", "{\"stdin\":\"YQ==\"}\n", "a", io.ErrUnexpectedEOF},
		{"bad base64", "{\"stdin\":\"!\"}\n", "", ErrMalformed},
		{"not json", "hello\n", "", ErrMalformed},
		{"too long", "{\"stdin\":\"" + strings.Repeat("A", 100) + "\"}\n", "", ErrTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := io.ReadAll(NewStdinReader(bufio.NewReaderSize(strings.NewReader(tt.in), 16), 64))
			if string(out) != tt.out || !errors.Is(err, tt.err) {
				t.Fatalf("Read: got %q %v, want %q %v", out, err, tt.out, tt.err)
			}
			// io.Copy's way, with no buffer between: the same.
			var w bytes.Buffer
			n, err := NewStdinReader(bufio.NewReaderSize(strings.NewReader(tt.in), 16), 64).WriteTo(&w)
			if w.String() != tt.out || n != int64(w.Len()) || !errors.Is(err, tt.err) {
				t.Fatalf("WriteTo: got %q (%d) %v, want %q %v", w.String(), n, err, tt.out, tt.err)
			}
		})
	}
	t.Run("writer fails", func(t *testing.T) {
		broken := errors.New("pipe closed")
		in := "{\"stdin\":\"YQ==\"}\n{\"eof\":true}\n"
		_, err := NewStdinReader(bufio.NewReader(strings.NewReader(in)), 64).WriteTo(failingWriter{broken})
		if !errors.Is(err, broken) {
			t.Fatalf("got %v, want the writer's error", err)
		}
	})
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

// FuzzParseHeader: any input is a header or an error, never a panic; an
// accepted header's cwd is inside the workspace and its args round-trip.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{`{"argv":["a"]}`, `{"argv":[],"cwd":"/workspace/x","session":"s","parent":"p"}`,
		`{"argv":null}`, `{"cwd":"/etc"}`, `{}`, `[]`, `{"argv":["a"]} {}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseCallHeader(b, "/workspace")
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrCwd) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if h.Cwd != "" && !Within(h.Cwd, "/workspace") {
			t.Fatalf("accepted cwd %q", h.Cwd)
		}
		var back CallHeader
		if err := json.Unmarshal(h.Args(), &back); err != nil || len(back.Argv) != len(h.Argv) {
			t.Fatalf("args %s do not round-trip: %v", h.Args(), err)
		}
	})
}

// FuzzStdinReader: the frame parser ends every input with data and EOF or
// an error, and never yields more bytes than the frames carried.
func FuzzStdinReader(f *testing.F) {
	f.Add([]byte("{\"stdin\":\"aGk=\"}\n{\"eof\":true}\n"))
	f.Add([]byte("{\"stdin\":\"\"}\n{\"stdin\":null}\n"))
	f.Add([]byte("\n\n{\"eof\":false}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := io.ReadAll(NewStdinReader(bufio.NewReaderSize(bytes.NewReader(b), 16), 256))
		if err == nil && !bytes.Contains(b, []byte("eof")) {
			t.Fatalf("clean end without an eof frame")
		}
		if len(out) > len(b) {
			t.Fatalf("%d bytes out of %d in", len(out), len(b))
		}
		var w bytes.Buffer
		_, werr := NewStdinReader(bufio.NewReaderSize(bytes.NewReader(b), 16), 256).WriteTo(&w)
		if !bytes.Equal(w.Bytes(), out) || (werr == nil) != (err == nil) {
			t.Fatalf("WriteTo gave %q %v, Read %q %v", w.Bytes(), werr, out, err)
		}
	})
}
