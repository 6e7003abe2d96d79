package capped

import (
	"bytes"
	"errors"
	"fmt"
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
