package proto

import (
	"errors"
	"io"
)

// Pump calls emit with each read of r until r ends, and returns the error
// that ended it (nil at EOF) or emit's. Each read goes into a buffer with
// head bytes of room in front of it, which emit gets with the data (a
// frame header goes there: one write a frame). The buffer starts at
// 4 KiB and doubles, up to most, while reads fill it: a large stream moves
// in few large pieces, a small one costs little memory, and every piece is
// passed on as soon as it is read. Both sides move exec streams with it.
func Pump(r io.Reader, head, most int, emit func(p []byte) error) error {
	buf := make([]byte, head+min(4<<10, most))
	for {
		n, err := r.Read(buf[head:])
		if n > 0 {
			if err := emit(buf[:head+n]); err != nil {
				return err
			}
			if n == len(buf)-head && n < most {
				buf = make([]byte, head+min(2*n, most))
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
