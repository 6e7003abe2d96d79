package capped

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestWriter(t *testing.T) {
	cases := []struct {
		name   string
		limit  int64
		writes []string
		want   string
	}{
		{"under the limit", 10, []string{"abc", "def"}, "abcdef"},
		{"exactly the limit", 6, []string{"abc", "def"}, "abcdef"},
		{"cut inside a write", 4, []string{"abc", "def"}, "abcd" + fmt.Sprintf(Marker, 2)},
		{"nothing passes", 0, []string{"abc"}, fmt.Sprintf(Marker, 3)},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		w := NewWriter(&buf, c.limit, nil)
		for _, s := range c.writes {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("%s: Write = %d, %v", c.name, n, err)
			}
		}
		w.Finish()
		if buf.String() != c.want {
			t.Errorf("%s: got %q, want %q", c.name, buf.String(), c.want)
		}
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("gone") }

// A failing sink never fails the writer: the process keeps draining.
func TestWriterSinkFails(t *testing.T) {
	w := NewWriter(failing{}, 100, nil)
	for range 3 {
		if n, err := w.Write([]byte("abc")); n != 3 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	w.Finish()
	if w.Err() == nil || w.Dropped() != 0 {
		t.Fatalf("Err = %v, Dropped = %d", w.Err(), w.Dropped())
	}
}

// A call's two streams go through to the caller only when it gave both
// (one writer for both is fine); otherwise both are kept for the result.
func TestStreams(t *testing.T) {
	cut := "abcd" + fmt.Sprintf(Marker, 2) // "abcdef" at a limit of 4
	var out, errOut, both bytes.Buffer
	cases := []struct {
		name           string
		stdout, stderr io.Writer
		// what the caller's writers hold afterwards, or what is kept
		got              func() (string, string)
		kept             bool
		wantOut, wantErr string
	}{
		{"both given", &out, &errOut, func() (string, string) { return out.String(), errOut.String() }, false, cut, "xy"},
		{"one writer for both", &both, &both, func() (string, string) { return both.String(), "" }, false, "abcdxy" + fmt.Sprintf(Marker, 2), ""},
		{"only stdout given", &out, nil, nil, true, cut, "xy"},
		{"none given", nil, nil, nil, true, cut, "xy"},
	}
	for _, c := range cases {
		out.Reset()
		errOut.Reset()
		s := NewStreams(c.stdout, c.stderr, 4)
		s.Stdout.Write([]byte("abcdef"))
		s.Stderr.Write([]byte("xy"))
		s.Finish()
		gotOut, gotErr, kept := s.Kept()
		if kept != c.kept || !s.Truncated() || s.Err() != nil {
			t.Fatalf("%s: kept %v, truncated %v, err %v", c.name, kept, s.Truncated(), s.Err())
		}
		if !kept {
			gotOut, gotErr = c.got()
		} else if out.Len() != 0 {
			t.Errorf("%s: wrote %q to a stream while keeping the output", c.name, out.String())
		}
		if gotOut != c.wantOut || gotErr != c.wantErr {
			t.Errorf("%s: stdout %q stderr %q, want %q %q", c.name, gotOut, gotErr, c.wantOut, c.wantErr)
		}
	}
	s := NewStreams(failing{}, failing{}, 4)
	s.Stderr.Write([]byte("x"))
	if s.Err() == nil {
		t.Fatal("a failing stream is not reported")
	}
}
