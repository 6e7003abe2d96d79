package proto

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// Pump hands on every byte once, in order, after the head room;
// its pieces double while reads fill them and never pass most; a read
// error or emit's ends it, EOF does not.
func TestPump(t *testing.T) {
	t.Parallel()
	data := make([]byte, 3<<20+7)
	for i := range data {
		data[i] = byte(i)
	}
	var got []byte
	var sizes []int
	err := Pump(bytes.NewReader(data), FrameHeaderLen, 256<<10, func(p []byte) error {
		sizes = append(sizes, len(p)-FrameHeaderLen)
		got = append(got, p[FrameHeaderLen:]...)
		return nil
	})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%v, %d bytes back", err, len(got))
	}
	if want := []int{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 256 << 10}; !slices.Equal(sizes[:8], want) || slices.Max(sizes) != 256<<10 {
		t.Fatalf("pieces %v", sizes[:8])
	}

	// Short reads stay short: each goes on as it is read.
	sizes = sizes[:0]
	if err := Pump(iotest.OneByteReader(bytes.NewReader(data[:100])), 0, 1<<20, func(p []byte) error {
		sizes = append(sizes, len(p))
		return nil
	}); err != nil || len(sizes) != 100 || slices.Max(sizes) != 1 {
		t.Fatalf("%v: %d pieces up to %d", err, len(sizes), slices.Max(sizes))
	}

	mine := errors.New("mine")
	if err := Pump(bytes.NewReader(data), 0, 1<<20, func([]byte) error { return mine }); !errors.Is(err, mine) {
		t.Fatalf("emit's error: %v", err)
	}
	if err := Pump(iotest.ErrReader(io.ErrClosedPipe), 0, 1<<20, func([]byte) error { return nil }); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("read error: %v", err)
	}
}
