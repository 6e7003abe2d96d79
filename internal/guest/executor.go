package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

func init() {
	commands["executor"] = command{"executor [--socket PATH]: serve the gateway's execs on a Unix socket (started by init)", cmdExecutor}
}

// drainGrace bounds how long a call's output is still read after its
// process group is dead: a process that left the group may hold the pipes.
const drainGrace = time.Second

func cmdExecutor(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("executor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", proto.ExecSocketPath, "Unix socket to serve on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	setExecutorProcs()
	ln, err := ListenExecutor(*socket)
	if err == nil {
		err = ServeExecutor(ln)
	}
	fmt.Fprintf(stderr, "toolgate-client executor: %v\n", err)
	return 1
}

// ListenExecutor replaces whatever is at path (a previous container's
// socket) with a fresh socket only this user can connect to.
func ListenExecutor(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return proto.SendBufferListener{Listener: ln}, nil
}

// ServeExecutor serves exec requests on ln until it fails.
func ServeExecutor(ln net.Listener) error { return ExecutorServer().Serve(ln) }

// ExecutorServer is the executor's HTTP server, not yet serving.
func ExecutorServer() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+proto.ExecRoute, serveExec)
	// Stdin streams for as long as the call runs: an idle timeout, no body deadline.
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
}

// serveExec runs one call with run's semantics. The process group is
// killed when the request's connection goes away.
func serveExec(w http.ResponseWriter, r *http.Request) {
	// One answer format: a peer that cannot read binary frames is told so
	// before anything runs.
	if r.Header.Get("Accept") != proto.ExecFramesMedia {
		http.Error(w, "the executor answers in binary frames only (Accept: "+proto.ExecFramesMedia+")", http.StatusNotAcceptable)
		return
	}
	// Small: it holds the request line; stdin is copied past it.
	body := bufio.NewReader(r.Body)
	line, err := readLine(body, proto.MaxExecLine)
	if err != nil {
		http.Error(w, "request line: "+err.Error(), http.StatusBadRequest)
		return
	}
	c, err := parseExecRequest(line)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Header.Get(proto.ExecBuiltinHeader) == proto.ExecBuiltinPut && builtinPut(c) {
		servePut(w, r, c, body)
		return
	}
	// A body that ends with its line (the gateway sends those with a
	// Content-Length) is a call without stdin: the command reads
	// /dev/null, as from an Engine exec without stdin, and no pipe or
	// pump is made for it.
	noStdin := r.ContentLength >= 0 && atEOF(body)
	var stdin *os.File
	first := 0
	if noStdin {
		if stdin, err = devNull(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		first = 1
	}
	var pipes [3][2]*os.File // [stdin, stdout, stderr][read, write]
	for i := first; i < len(pipes); i++ {
		if pipes[i], err = childPipe(i == 0); err != nil {
			for _, p := range pipes[first:i] {
				p[0].Close()
				p[1].Close()
			}
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if !noStdin {
		stdin = pipes[0][0]
	}
	c.stdio = [3]*os.File{stdin, pipes[1][1], pipes[2][1]}
	_ = http.NewResponseController(w).EnableFullDuplex()
	out := newFrameOut(w)

	// The call ends when the gateway goes away (the request's context)
	// or its output can no longer be written (gone).
	ctx, gone := context.WithCancel(r.Context())
	defer gone()
	c.cancel = ctx
	if !noStdin {
		go func() {
			err := pipePump(body, pipes[0][1], 0, proto.MaxFramePayload, func(p []byte) error {
				_, err := pipes[0][1].Write(p)
				return err
			})
			pipes[0][1].Close()
			var pe *os.PathError
			if err != nil && !errors.As(err, &pe) {
				gone() // the body broke, not the pipe: the connection is gone
			}
		}()
	}
	var wg sync.WaitGroup
	for i, kind := range []byte{proto.FrameStdout, proto.FrameStderr} {
		rd := pipes[i+1][0]
		wg.Go(func() {
			defer rd.Close()
			out.relay(kind, rd, gone)
		})
	}

	start := time.Now()
	code := runCall(c, pipes[2][1])
	if !noStdin {
		pipes[0][0].Close()
	}
	pipes[1][1].Close()
	pipes[2][1].Close()
	// A process that left the group may hold the pipes: its output is
	// read for drainGrace more, then no longer.
	stop := time.AfterFunc(drainGrace, func() {
		pipes[1][0].Close()
		pipes[2][0].Close()
	})
	wg.Wait()
	stop.Stop()
	timedOut := c.timeout > 0 && code == ExitTimeout && time.Since(start) >= c.timeout
	_ = out.exit(proto.ExecExit{ExitCode: code, TimedOut: timedOut})
}

// atEOF reports whether r has nothing more to read (without blocking when
// it has: a body of known length holds what it promised).
func atEOF(r *bufio.Reader) bool {
	_, err := r.Peek(1)
	return errors.Is(err, io.EOF)
}

// devNull is the stdin of every call without one, opened once.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// builtinClient is the program whose `put` the executor serves in process
// (a variable for the tests, whose binary is not installed there).
var builtinClient = proto.ClientPath

// builtinPut reports whether c is `toolgate-client put …` as the gateway's
// write runs it: a call with a timeout keeps the child, whose group the
// timeout kills.
func builtinPut(c *callSpec) bool {
	return len(c.argv) >= 2 && c.argv[0] == builtinClient && c.argv[1] == "put" && c.timeout == 0
}

// servePut runs c, a `put`, in this process (putCommand, as the command
// itself runs it) with the rest of the request body as its stdin, and
// answers as for the child: its stderr, then its exit code. The content
// goes from the connection straight into the file, with no process to
// start and no pipe to cross, on the sandbox's CPU quota. When the
// connection goes away the body ends short and put removes its temporary
// file, as it does for a cut stream.
func servePut(w http.ResponseWriter, r *http.Request, c *callSpec, body io.Reader) {
	w.Header().Set(proto.ExecBuiltinHeader, proto.ExecBuiltinPut)
	var stderr bytes.Buffer
	code := exitKilled
	if !killedBeforeStart(c, &stderr) {
		code = putCommand(c.argv[2:], c.dir, body, &stderr)
	}
	out := newFrameOut(w)
	for msg := stderr.Bytes(); len(msg) > 0; {
		n := min(len(msg), proto.MaxFramePayload)
		_ = out.output(proto.FrameStderr, append(make([]byte, proto.FrameHeaderLen), msg[:n]...))
		msg = msg[n:]
	}
	_ = out.exit(proto.ExecExit{ExitCode: code})
}

// childPipe is a pipe, [read, write], whose child's end (the read end when
// the child reads) is a plain blocking descriptor: only the child uses it,
// so it never enters this process's poller, which os.Pipe would put it in
// and os/exec take it out of again — syscalls on every call's three pipes.
// The executor's end is non-blocking, in the poller.
func childPipe(childReads bool) ([2]*os.File, error) {
	var fd [2]int
	if err := syscall.Pipe2(fd[:], syscall.O_CLOEXEC); err != nil {
		return [2]*os.File{}, os.NewSyscallError("pipe2", err)
	}
	ours := fd[0]
	if childReads {
		ours = fd[1]
	}
	if err := syscall.SetNonblock(ours, true); err != nil {
		syscall.Close(fd[0])
		syscall.Close(fd[1])
		return [2]*os.File{}, os.NewSyscallError("fcntl", err)
	}
	return [2]*os.File{os.NewFile(uintptr(fd[0]), "|0"), os.NewFile(uintptr(fd[1]), "|1")}, nil
}

// parseExecRequest checks a request line; the environment is this
// process's (the container's) plus the request's.
func parseExecRequest(line []byte) (*callSpec, error) {
	var req proto.ExecRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("bad request: %w", err)
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("bad request: empty argv")
	}
	if req.CallID != "" && !proto.ValidCallID(req.CallID) {
		return nil, fmt.Errorf("bad request: invalid call id %q", req.CallID)
	}
	if req.Cwd != "" && !filepath.IsAbs(req.Cwd) {
		return nil, fmt.Errorf("bad request: cwd %q is not absolute", req.Cwd)
	}
	c := &callSpec{argv: req.Argv, dir: req.Cwd, callID: req.CallID, env: append(os.Environ(), req.Env...)}
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bad request: timeout %q", req.Timeout)
		}
		c.timeout = d
	}
	return c, nil
}

// readLine reads one \n-terminated line of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > max {
			return nil, fmt.Errorf("longer than %d bytes", max)
		}
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// frameOut writes binary frames (proto.ReadExecFrames) to the streamed
// response, flushing each.
type frameOut struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	err error
}

func newFrameOut(w http.ResponseWriter) *frameOut {
	w.Header().Set("Content-Type", proto.ExecFramesMedia)
	w.WriteHeader(http.StatusOK)
	return &frameOut{w: w}
}

// relay sends what the pipe rd gives as output frames of kind until it
// ends; when a frame cannot be written (the gateway went away) it calls
// failed and drains rd. A frame carries what one read returned, so output
// goes as it comes; a large output goes in large frames (pipePump).
func (f *frameOut) relay(kind byte, rd *os.File, failed func()) {
	// The frame header goes in front of the payload: one write a frame.
	_ = pipePump(rd, rd, proto.FrameHeaderLen, proto.MaxFramePayload, func(p []byte) error {
		if f.output(kind, p) != nil {
			failed()
		}
		return nil
	})
}

// fSetPipeSize is Linux's F_SETPIPE_SZ, which package syscall lacks.
const fSetPipeSize = 1031

// pipePump is proto.Pump from r, growing pipe (r itself, or where the data
// goes) to most once a read fills a default pipe (64 KiB): a call that
// moves much moves it in large reads and writes, and only such a call holds
// a large pipe (the sandbox user's pipe quota is shared with its own
// programs; the kernel refuses past it, and the pipe stays as it was).
func pipePump(r io.Reader, pipe *os.File, head, most int, emit func([]byte) error) error {
	grown := false
	return proto.Pump(r, head, most, func(p []byte) error {
		if len(p)-head >= 64<<10 && most > 64<<10 && !grown {
			grown = true
			if sc, err := pipe.SyscallConn(); err == nil {
				_ = sc.Control(func(fd uintptr) { _, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, uintptr(most)) })
			}
		}
		return emit(p)
	})
}

// output writes p[proto.FrameHeaderLen:] as one output frame of kind; the
// front of p is room for the header.
func (f *frameOut) output(kind byte, p []byte) error {
	proto.PutFrameHeader(p, kind, len(p)-proto.FrameHeaderLen)
	return f.write(func() error { _, err := f.w.Write(p); return err })
}

// exit writes the exit frame, the answer's last, unflushed: it goes out
// with the body's end when the handler returns, in one write, so the
// gateway has both at once and may keep the connection for its next call.
func (f *frameOut) exit(e proto.ExecExit) error {
	fr := proto.ExitFrame(e)
	return f.send(func() error { _, err := f.w.Write(fr); return err }, false)
}

// write runs one frame's write and flushes it, unless an earlier one failed.
func (f *frameOut) write(frame func() error) error { return f.send(frame, true) }

func (f *frameOut) send(frame func() error, flush bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		if f.err = frame(); f.err == nil && flush {
			f.err = http.NewResponseController(f.w).Flush()
		}
	}
	return f.err
}
