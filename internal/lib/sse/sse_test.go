package sse

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestRead(t *testing.T) {
	cut := errors.New("connection cut")
	for _, tt := range []struct {
		name   string
		stream io.Reader
		want   []string
		err    error
	}{
		{"whole", strings.NewReader("event: a\ndata: {\"a\":1}\n\nevent: b\ndata: {\"b\":2}\n"), []string{`a {"a":1}`, `b {"b":2}`}, nil},
		{"no type, lines joined", strings.NewReader(": comment\ndata: x\ndata:y\nid: 3\n\n\n\ndata: z\n\n"), []string{" x\ny", " z"}, nil},
		{"cut mid-event", io.MultiReader(strings.NewReader("event: a\ndata: {\"a\":1}\n\nevent: b\ndata: {\"b\""), iotest.ErrReader(cut)), []string{`a {"a":1}`}, cut},
		{"line too long", strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"), nil, bufio.ErrTooLong},
	} {
		var got []string
		err := Read(tt.stream, 64, func(event string, data []byte) { got = append(got, event+" "+string(data)) })
		if !slices.Equal(got, tt.want) || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%s: got %q %v, want %q %v", tt.name, got, err, tt.want, tt.err)
		}
	}
}

// Whatever the bytes, Read ends, and every event it passes on has data
// made of the data lines it saw.
func FuzzRead(f *testing.F) {
	f.Add("event: a\ndata: {\"a\":1}\n\ndata: b\n")
	f.Add("data: x\ndata: y\n\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		_ = Read(strings.NewReader(s), 1<<10, func(event string, data []byte) {
			if len(data) == 0 || strings.ContainsAny(event, "\n") {
				t.Fatalf("event %q data %q", event, data)
			}
		})
	})
}
