package proto

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// frame is one frame as an executor writes it.
func frame(kind byte, payload string) string {
	h := make([]byte, FrameHeaderLen)
	PutFrameHeader(h, kind, len(payload))
	return string(h) + payload
}

func exitFrame(code int, timedOut bool) string {
	return string(ExitFrame(ExecExit{ExitCode: code, TimedOut: timedOut}))
}

// header is a frame header claiming n bytes, whatever follows.
func header(kind byte, n uint32) string {
	return string([]byte{kind, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func TestReadExecFrames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in       string
		stdout, stderr string
		exit           *ExecExit
		err            string
	}{
		{"output then exit", frame(FrameStdout, "hi") + frame(FrameStderr, "err") + frame(FrameStdout, "\x00\xff\n") + exitFrame(3, true),
			"hi\x00\xff\n", "err", &ExecExit{ExitCode: 3, TimedOut: true}, ""},
		{"empty output frame", frame(FrameStdout, "") + exitFrame(0, false), "", "", &ExecExit{}, ""},
		{"exit 255", exitFrame(255, false), "", "", &ExecExit{ExitCode: 255}, ""},
		{"nothing after the exit frame is read", exitFrame(1, false) + "garbage", "", "", &ExecExit{ExitCode: 1}, ""},
		{"empty stream", "", "", "", nil, "without an exit frame"},
		{"no exit", frame(FrameStdout, "hi"), "hi", "", nil, "without an exit frame"},
		{"cut header", frame(FrameStdout, "hi")[:3], "", "", nil, "without an exit frame"},
		{"cut payload", frame(FrameStdout, "hello")[:7], "he", "", nil, "without an exit frame"},
		{"cut exit", exitFrame(0, false)[:6], "", "", nil, "without an exit frame"},
		{"huge length", header(FrameStdout, 0xffffffff) + "x", "", "", nil, "over 1048576"},
		{"one over the bound", header(FrameStderr, MaxFramePayload+1), "", "", nil, "over 1048576"},
		{"bound claimed, little sent", header(FrameStdout, MaxFramePayload) + "abc", "abc", "", nil, "without an exit frame"},
		{"unknown kind", frame('j', `{"stdout":"aGk="}`), "", "", nil, "unknown kind"},
		{"json frame", `{"stdout":"aGk="}` + "\n", "", "", nil, "unknown kind"},
		{"long exit", frame(FrameExit, "\x00\x00\x00"), "", "", nil, "exit frame of 3 bytes"},
		{"short exit", frame(FrameExit, "\x00"), "", "", nil, "exit frame of 1 bytes"},
		{"timed-out byte", frame(FrameExit, "\x00\x02"), "", "", nil, "timed-out byte is 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o, e bytes.Buffer
			exit, err := ReadExecFrames(strings.NewReader(tt.in), &o, &e)
			if o.String() != tt.stdout || e.String() != tt.stderr {
				t.Errorf("output %q %q, want %q %q", o.String(), e.String(), tt.stdout, tt.stderr)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v %+v, want error %q", err, exit, tt.err)
				}
				if strings.Contains(tt.err, "without an exit frame") && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("%v: a cut stream should be io.ErrUnexpectedEOF", err)
				}
				return
			}
			if err != nil || *exit != *tt.exit {
				t.Fatalf("got %v %+v, want %+v", err, exit, tt.exit)
			}
		})
	}
}

// A writer's failure is the error, as it is (the host's own, e.g. a read
// over its limit), and ends the read.
func TestReadExecFramesWriterError(t *testing.T) {
	t.Parallel()
	mine := errors.New("mine")
	in := frame(FrameStdout, "hi") + frame(FrameStdout, "more") + exitFrame(0, false)
	_, err := ReadExecFrames(strings.NewReader(in), failWriter{mine}, io.Discard)
	if !errors.Is(err, mine) || errors.Is(err, ErrBadFrame) {
		t.Fatalf("got %v", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

// Many full-size frames are read through one buffer: what the reader
// allocates does not grow with the stream.
func TestReadExecFramesAllocationBounded(t *testing.T) {
	t.Parallel()
	payload := strings.Repeat("x", MaxFramePayload)
	var in strings.Builder
	for range 32 {
		in.WriteString(frame(FrameStdout, payload))
	}
	in.WriteString(exitFrame(0, false))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n := &countWriter{}
	if _, err := ReadExecFrames(strings.NewReader(in.String()), n, io.Discard); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n.n != 32*MaxFramePayload {
		t.Fatalf("read %d bytes", n.n)
	}
	// One buffer (at most MaxFramePayload, grown by doubling), with room
	// for what the runtime does meanwhile; 32 MiB if it were per frame.
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*MaxFramePayload {
		t.Fatalf("allocated %d bytes for a 32 MiB stream", got)
	}
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// Whatever a sandbox sends: no panic, no more output than input, an exit
// code in range only with a well-formed exit frame, and never a claimed
// length allocated (the input is at most what the fuzzer gives; a huge
// claim would show as a crash or a timeout).
func FuzzReadExecFrames(f *testing.F) {
	f.Add([]byte(frame(FrameStdout, "hi") + exitFrame(0, false)))
	f.Add([]byte(frame(FrameStderr, "") + exitFrame(124, true)))
	f.Add([]byte(header(FrameStdout, 0xffffffff)))
	f.Add([]byte(header(FrameStdout, MaxFramePayload) + "abc"))
	f.Add([]byte(frame(FrameExit, "\x00\x01\x02")))
	f.Add([]byte(`{"stdout":"aGk="}` + "\n" + `{"exit":{"exitCode":0}}` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var o, e bytes.Buffer
		exit, err := ReadExecFrames(bytes.NewReader(in), &o, &e)
		if o.Len()+e.Len() > len(in) {
			t.Fatalf("more output than input: %d+%d > %d", o.Len(), e.Len(), len(in))
		}
		if err != nil {
			if exit != nil || !errors.Is(err, ErrBadFrame) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%v with %+v", err, exit)
			}
			return
		}
		if exit == nil || exit.ExitCode < 0 || exit.ExitCode > 255 {
			t.Fatalf("accepted %q as %+v", in, exit)
		}
		// What was accepted, written again, reads back the same.
		var again bytes.Buffer
		if o.Len() > 0 {
			again.WriteString(frame(FrameStdout, o.String()))
		}
		if e.Len() > 0 {
			again.WriteString(frame(FrameStderr, e.String()))
		}
		again.Write(ExitFrame(*exit))
		var o2, e2 bytes.Buffer
		exit2, err := ReadExecFrames(&again, &o2, &e2)
		if err != nil || *exit2 != *exit || o2.String() != o.String() || e2.String() != e.String() {
			t.Fatalf("round trip: %v %+v", err, exit2)
		}
	})
}
