package sse

import (
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
		{"line too long", strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"), nil, ErrTooLong},
		{"data too long", strings.NewReader("data: " + strings.Repeat("x", 40) + "\ndata: " + strings.Repeat("x", 40) + "\n\n"), nil, ErrTooLong},
		{"crlf, no space, bare field", strings.NewReader("event:a\r\ndata:1\r\ndata\r\n\r\n"), []string{"a 1\n"}, nil},
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

// The parser skips an event over its bound whole and goes on with the
// next; what it passes on does not depend on how the bytes were cut.
func TestParserSkipsLongEvents(t *testing.T) {
	var got []string
	p := NewParser(16, func(event string, data []byte) { got = append(got, event+" "+string(data)) })
	stream := "event: a\ndata: 1\n\nevent: big\ndata: " + strings.Repeat("x", 40) + "\n\nevent: b\ndata: 2\n"
	for i := range len(stream) {
		p.Write([]byte{stream[i]})
	}
	p.Close()
	if want := []string{"a 1", "b 2"}; !slices.Equal(got, want) || !p.Skipped() {
		t.Fatalf("got %q (skipped %v), want %q", got, p.Skipped(), want)
	}
}

// Whatever the bytes and however they are cut, the parser passes on the
// same events, each within its bound.
func FuzzParser(f *testing.F) {
	f.Add("event: a\ndata: {\"a\":1}\n\ndata: b\n", 3)
	f.Add("data: x\r\ndata: y\r\n\r\n\n", 1)
	f.Fuzz(func(t *testing.T, s string, cut int) {
		collect := func(parts ...string) (events []string) {
			p := NewParser(64, func(event string, data []byte) {
				if len(data) == 0 || len(data) > 64 || strings.ContainsAny(event, "\n") {
					t.Fatalf("event %q data %q", event, data)
				}
				events = append(events, event+"\x00"+string(data))
			})
			for _, part := range parts {
				p.Write([]byte(part))
			}
			p.Close()
			return events
		}
		if cut < 0 || cut > len(s) {
			cut = len(s) / 2
		}
		if whole, parts := collect(s), collect(s[:cut], s[cut:]); !slices.Equal(whole, parts) {
			t.Fatalf("whole %q, cut at %d %q", whole, cut, parts)
		}
	})
}
