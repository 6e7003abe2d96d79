package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Exec frames: the executor's answer, output as bytes. The gateway asks
// with `Accept: ExecFramesMedia`; the executor answers 200 with that
// Content-Type, or 406 to any other Accept — there is one format.
//
// A frame is a header of FrameHeaderLen bytes — its kind, then the
// payload's length as a big-endian uint32 — followed by the payload: the
// output bytes as they are for FrameStdout and FrameStderr; for FrameExit
// exactly two bytes, the exit code and 1 if the call timed out (else 0).
// The exit frame is the last.
const (
	ExecFramesMedia = "application/vnd.toolgate.exec-frames"

	FrameStdout byte = 'o'
	FrameStderr byte = 'e'
	FrameExit   byte = 'x'

	FrameHeaderLen = 5
	// MaxFramePayload bounds every frame's payload: the most a reader
	// holds of one frame, whatever length a header claims.
	MaxFramePayload = 1 << 20
)

// PutFrameHeader writes the header of a frame of kind with an n-byte
// payload into h[:FrameHeaderLen].
func PutFrameHeader(h []byte, kind byte, n int) {
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:FrameHeaderLen], uint32(n))
}

// ExitFrame is the whole exit frame of e. The exit code must be 0–255.
func ExitFrame(e ExecExit) []byte {
	fr := make([]byte, FrameHeaderLen+2)
	PutFrameHeader(fr, FrameExit, 2)
	fr[FrameHeaderLen] = byte(e.ExitCode)
	if e.TimedOut {
		fr[FrameHeaderLen+1] = 1
	}
	return fr
}

// ErrBadFrame is wrapped by every error about a malformed frame stream; an
// error from stdout or stderr is returned as it is.
var ErrBadFrame = errors.New("bad executor frame")

// ReadExecFrames copies binary output frames from r to stdout and stderr
// and returns the exit frame's outcome; nothing after it is read. r is the
// sandbox's word: a length over MaxFramePayload is refused before any of
// its payload is read, payloads go through one buffer of at most
// MaxFramePayload bytes (never allocated at a length a header claims), and
// a stream that ends before its exit frame is an error.
func ReadExecFrames(r io.Reader, stdout, stderr io.Writer) (*ExecExit, error) {
	var hdr [FrameHeaderLen]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, truncated(err)
		}
		kind, n := hdr[0], binary.BigEndian.Uint32(hdr[1:])
		var w io.Writer
		switch kind {
		case FrameStdout:
			w = stdout
		case FrameStderr:
			w = stderr
		case FrameExit:
			return readExit(r, n)
		default:
			return nil, fmt.Errorf("%w: unknown kind %#x", ErrBadFrame, kind)
		}
		if n > MaxFramePayload {
			return nil, fmt.Errorf("%w: %d-byte payload, over %d", ErrBadFrame, n, MaxFramePayload)
		}
		if int(n) > len(buf) {
			// As large as the frames come (small for a small output),
			// doubling, so ever longer frames reallocate a few times,
			// not once a frame.
			buf = make([]byte, min(max(int(n), 2*len(buf)), MaxFramePayload))
		}
		for left := int(n); left > 0; {
			m, err := r.Read(buf[:min(left, len(buf))])
			if m > 0 {
				if _, werr := w.Write(buf[:m]); werr != nil {
					return nil, werr
				}
				left -= m
			}
			if err != nil && left > 0 {
				return nil, truncated(err)
			}
		}
	}
}

func readExit(r io.Reader, n uint32) (*ExecExit, error) {
	if n != 2 {
		return nil, fmt.Errorf("%w: exit frame of %d bytes, want 2", ErrBadFrame, n)
	}
	var p [2]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return nil, truncated(err)
	}
	if p[1] > 1 {
		return nil, fmt.Errorf("%w: exit frame's timed-out byte is %d", ErrBadFrame, p[1])
	}
	return &ExecExit{ExitCode: int(p[0]), TimedOut: p[1] == 1}, nil
}

// truncated names a stream that ended (or broke) before its exit frame.
func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("executor stream ended without an exit frame: %w", err)
}
