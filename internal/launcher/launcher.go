package launcher

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/toolgate/toolgate/internal/proto"
)

// Exit codes of a launcher that did not get the handler's own exit code
// (sysexits.h where one fits); docs/protocol.md lists them.
const (
	ExitUsage       = 64  // the gateway refused the request as malformed or too large
	ExitSoftware    = 70  // the tool failed without an exit code
	ExitProtocol    = 76  // the gateway's answer made no sense
	ExitUnavailable = 69  // gateway unreachable, or gone mid-call
	ExitDenied      = 77  // policy denied the call
	ExitNotFound    = 127 // no such tool (as a shell's command not found)
)

// DialTimeout bounds a connect to the gateway socket; a Unix socket either answers at once or
// its listener is gone (or its queue is full).
const DialTimeout = 2 * time.Second

// Launch calls tool name with argv through the agent socket, streaming
// output as it comes, and returns the handler's exit code. It is what
// /tools/bin/NAME runs. Every call starts a process, so its cost is the
// process's: plain blocking system calls on the socket (no poller, no
// extra threads), no signal handling of its own (SIGINT, SIGTERM and SIGHUP
// end the process as they would any program, and the closed socket makes
// the host cancel the handler), and a plain request when stdin has nothing
// to stream.
func Launch(name string, argv []string) int {
	if !validToolName(name) {
		fmt.Fprintf(os.Stderr, "toolgate: invalid tool name %q\n", name)
		return ExitUsage
	}
	sock := os.Getenv("TOOLGATE_SOCKET")
	if sock == "" {
		sock = proto.SocketPath
	}
	cwd, _ := syscall.Getwd()
	hdr, _ := json.Marshal(callHeader{Argv: argv, Cwd: cwd, Parent: os.Getenv(proto.EnvCallID), Session: os.Getenv("TOOLGATE_SESSION")})

	conn, err := Dial(sock, DialTimeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "toolgate: %s: gateway unavailable at %s: %v\n", name, sock, err)
		return ExitUnavailable
	}
	first, stream := stdinStart(os.Stdin)
	req := make([]byte, 0, 256+len(hdr))
	req = append(req, "POST "...)
	req = append(req, proto.CallPath(name)...)
	req = append(req, " HTTP/1.1\r\nHost: toolgate\r\nUser-Agent: toolgate-client\r\n"...)
	if stream {
		req = append(req, "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"...)
		req = appendChunk(req, append(hdr, '\n'))
		if len(first) > 0 {
			req = appendChunk(req, appendStdinFrame(nil, first))
		}
	} else {
		req = append(req, "Content-Type: application/json\r\nContent-Length: "...)
		req = strconv.AppendInt(req, int64(len(hdr)), 10)
		req = append(req, "\r\n\r\n"...)
		req = append(req, hdr...)
	}
	if _, err := conn.Write(req); err != nil {
		fmt.Fprintf(os.Stderr, "toolgate: %s: sending the call to the gateway: %v\n", name, err)
		return ExitUnavailable
	}
	if stream {
		go sendStdin(conn, os.Stdin)
	}
	return readResponse(name, bufio.NewReaderSize(conn, 32<<10), os.Stdout, os.Stderr)
}

// Conn is a connection to the gateway: a blocking Unix socket used with
// plain read and write system calls.
type Conn int

// Dial connects to the Unix socket at path, waiting at most timeout for
// room in its listen queue.
func Dial(path string, timeout time.Duration) (Conn, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	// A blocking connect on a Unix socket waits for the listen queue as
	// long as the send timeout allows; reset after, so writes never time out.
	tv := syscall.NsecToTimeval(int64(timeout))
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		if err == syscall.EAGAIN {
			return -1, fmt.Errorf("connect: no answer within %s", timeout)
		}
		return -1, os.NewSyscallError("connect", err)
	}
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &syscall.Timeval{})
	return Conn(fd), nil
}

func (c Conn) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(c), p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c Conn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(int(c), p[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// Close closes the socket.
func (c Conn) Close() error { return syscall.Close(int(c)) }

type callHeader struct {
	Argv    []string `json:"argv"`
	Cwd     string   `json:"cwd,omitempty"`
	Session string   `json:"session,omitempty"`
	Parent  string   `json:"parent,omitempty"`
}

func validToolName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return s != "." && s != ".."
}

// stdinStart decides whether the call gets our stdin. A terminal or
// /dev/null (character devices) or a closed fd does not, so an interactive
// launcher never waits for input nobody will type; nor does input already
// at its end (an empty pipe or file: `true | tool`), which then costs no
// stream. Otherwise the call streams stdin, starting with first, read
// here when it was ready.
func stdinStart(f *os.File) (first []byte, stream bool) {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice != 0 {
		return nil, false
	}
	if !readable(int(f.Fd())) {
		return nil, true
	}
	buf := make([]byte, stdinChunk)
	n, err := f.Read(buf)
	if n == 0 && err != nil {
		return nil, false
	}
	return buf[:n], true
}

// readable reports whether a read of fd would not block now.
func readable(fd int) bool {
	pfd := struct {
		fd             int32
		events, revent int16
	}{fd: int32(fd), events: 0x1} // POLLIN
	var ts syscall.Timespec // zero: do not wait
	n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return errno == 0 && n == 1 && pfd.revent != 0
}

// stdinChunk is the most stdin one frame carries.
const stdinChunk = 32 << 10

// sendStdin streams r as stdin frames, then the eof frame and the end of
// the chunked body. Errors end it quietly: the response says how the call went.
func sendStdin(w io.Writer, r io.Reader) {
	buf := make([]byte, stdinChunk)
	frame := make([]byte, 0, base64.StdEncoding.EncodedLen(len(buf))+64)
	out := make([]byte, 0, cap(frame)+16)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(appendChunk(out[:0], appendStdinFrame(frame[:0], buf[:n]))); werr != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	_, _ = w.Write(appendChunk(out[:0], []byte("{\"eof\":true}\n")))
	_, _ = io.WriteString(w, "0\r\n\r\n")
}

func appendStdinFrame(dst, p []byte) []byte {
	dst = append(dst, `{"stdin":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, p)
	return append(dst, "\"}\n"...)
}

func appendChunk(dst, p []byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(p)), 16)
	dst = append(dst, "\r\n"...)
	dst = append(dst, p...)
	return append(dst, "\r\n"...)
}

// respFrame mirrors wire.Frame without importing the gateway into the
// launcher: every package it pulls in costs start-up time in every call.
type respFrame struct {
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	Result *struct {
		ExitCode *int   `json:"exitCode"`
		Error    string `json:"error"`
	} `json:"result"`
	Error *RespError `json:"error"`
}

// RespError is the gateway's JSON error body.
type RespError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Rule    string `json:"rule"`
	ID      string `json:"id"`
}

// readResponse reads the gateway's answer and returns the exit code.
func readResponse(name string, r *bufio.Reader, stdout, stderr io.Writer) int {
	status, chunked, length, err := ReadHead(r)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate: %s: connection to the gateway lost before it answered (gateway restarting?): %v\n", name, err)
		return ExitUnavailable
	}
	var body io.Reader = r
	switch {
	case chunked:
		body = NewChunkedReader(r)
	case length >= 0:
		body = io.LimitReader(r, length)
	}
	if status != 200 {
		var e struct {
			Error *RespError `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(body, 1<<20))
		if json.Unmarshal(b, &e) != nil || e.Error == nil {
			fmt.Fprintf(stderr, "toolgate: %s: gateway answered %d: %s\n", name, status, strings.TrimSpace(string(b)))
			return exitForStatus(status)
		}
		printError(stderr, name, e.Error)
		return exitForStatus(status)
	}
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A frame longer than the buffer: collect it whole.
			rest, rerr := br.ReadBytes('\n')
			line, err = append(append([]byte(nil), line...), rest...), rerr
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				fmt.Fprintf(stderr, "toolgate: %s: connection to the gateway lost mid-call (gateway restarting?); the call's outcome is unknown\n", name)
				return ExitUnavailable
			}
			fmt.Fprintf(stderr, "toolgate: %s: reading from the gateway: %v\n", name, err)
			return ExitUnavailable
		}
		var f respFrame
		if err := json.Unmarshal(line, &f); err != nil {
			fmt.Fprintf(stderr, "toolgate: %s: bad frame from the gateway: %v\n", name, err)
			return ExitProtocol
		}
		switch {
		case f.Stdout != nil:
			// A closed stdout ends this process with SIGPIPE, which closes
			// the socket and so cancels the call on the host.
			_, _ = stdout.Write(f.Stdout)
		case f.Stderr != nil:
			_, _ = stderr.Write(f.Stderr)
		case f.Error != nil:
			printError(stderr, name, f.Error)
			if f.Error.Code == "denied" {
				return ExitDenied
			}
			return ExitSoftware
		case f.Result != nil:
			if f.Result.Error != "" {
				fmt.Fprintf(stderr, "toolgate: %s: %s\n", name, f.Result.Error)
			}
			if c := f.Result.ExitCode; c != nil {
				if *c < 0 || *c > 255 {
					fmt.Fprintf(stderr, "toolgate: %s: bad exit code %d from the gateway\n", name, *c)
					return ExitProtocol
				}
				return *c
			}
			if f.Result.Error != "" {
				return ExitSoftware
			}
			return 0
		}
	}
}

func printError(w io.Writer, name string, e *RespError) {
	switch {
	case e.Rule != "" && e.ID != "":
		fmt.Fprintf(w, "toolgate: %s: %s (%s; audit id %s): %s\n", name, e.Code, e.Rule, e.ID, e.Message)
	case e.Rule != "":
		fmt.Fprintf(w, "toolgate: %s: %s (%s): %s\n", name, e.Code, e.Rule, e.Message)
	default:
		fmt.Fprintf(w, "toolgate: %s: %s: %s\n", name, e.Code, e.Message)
	}
}

func exitForStatus(status int) int {
	switch status {
	case 403:
		return ExitDenied
	case 404:
		return ExitNotFound
	case 400, 413, 415:
		return ExitUsage
	case 502, 503, 504:
		return ExitUnavailable
	}
	return ExitSoftware
}

// readHead reads the status line and the headers the launcher cares about.
// length is -1 when not given.
// ReadHead reads an HTTP/1.1 response head: the status, whether the body
// is chunked, and its length (-1 when not given).
func ReadHead(r *bufio.Reader) (status int, chunked bool, length int64, err error) {
	length = -1
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, false, 0, err
	}
	// HTTP/1.1 200 OK
	f := strings.Fields(string(line))
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		return 0, false, 0, fmt.Errorf("not an HTTP response: %q", strings.TrimSpace(string(line)))
	}
	if status, err = strconv.Atoi(f[1]); err != nil {
		return 0, false, 0, fmt.Errorf("bad status %q", f[1])
	}
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, false, 0, err
		}
		k, v, ok := strings.Cut(strings.TrimRight(string(line), "\r\n"), ":")
		if !ok {
			return status, chunked, length, nil // the blank line
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(k) {
		case "transfer-encoding":
			chunked = strings.EqualFold(v, "chunked")
		case "content-length":
			if length, err = strconv.ParseInt(v, 10, 64); err != nil || length < 0 {
				return 0, false, 0, fmt.Errorf("bad Content-Length %q", v)
			}
		}
	}
}

// chunkedReader decodes an HTTP/1.1 chunked body; the end of the socket
// before the last chunk is io.ErrUnexpectedEOF.
// NewChunkedReader reads an HTTP/1.1 chunked body from r.
func NewChunkedReader(r *bufio.Reader) *ChunkedReader { return &ChunkedReader{r: r} }

// ChunkedReader reads an HTTP/1.1 chunked body.
type ChunkedReader struct {
	r    *bufio.Reader
	left int64
	done bool
}

func (c *ChunkedReader) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.EOF
	}
	if c.left == 0 {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, unexpected(err)
		}
		size, _, _ := strings.Cut(strings.TrimSpace(string(line)), ";")
		n, err := strconv.ParseInt(size, 16, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad chunk size %q", size)
		}
		if n == 0 {
			c.done = true
			return 0, io.EOF
		}
		c.left = n
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		if _, err = c.r.Discard(2); err != nil { // CRLF after the data
			return n, unexpected(err)
		}
	}
	return n, unexpected(err)
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
