package launcher

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

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
// its listener is gone.
const DialTimeout = 2 * time.Second

// Launch calls tool name with argv through the agent socket, streaming
// output as it comes, and returns the handler's exit code. It is what
// /tools/bin/NAME runs: a symlink to the client.
func Launch(name string, argv []string) int {
	if !validToolName(name) {
		fmt.Fprintf(os.Stderr, "toolgate: invalid tool name %q\n", name)
		return ExitUsage
	}
	sock := os.Getenv("TOOLGATE_SOCKET")
	if sock == "" {
		sock = proto.SocketPath
	}
	cwd, _ := os.Getwd()
	hdr, _ := json.Marshal(callHeader{Argv: argv, Cwd: cwd, Parent: os.Getenv(proto.EnvCallID), Session: os.Getenv("TOOLGATE_SESSION")})

	conn, err := net.DialTimeout("unix", sock, DialTimeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "toolgate: %s: gateway unavailable at %s: %v\n", name, sock, UnwrapOp(err))
		return ExitUnavailable
	}
	// A signal ends the call: exiting closes the socket, which makes the
	// host cancel the handler and kill what it started.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		os.Exit(128 + int(s.(syscall.Signal)))
	}()

	stream := stdinStreams()
	req := make([]byte, 0, 256+len(hdr))
	req = append(req, "POST "...)
	req = append(req, proto.CallPath(name)...)
	req = append(req, " HTTP/1.1\r\nHost: toolgate\r\nUser-Agent: toolgate-client\r\n"...)
	if stream {
		req = append(req, "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"...)
		req = appendChunk(req, append(hdr, '\n'))
	} else {
		req = append(req, "Content-Type: application/json\r\nContent-Length: "...)
		req = strconv.AppendInt(req, int64(len(hdr)), 10)
		req = append(req, "\r\n\r\n"...)
		req = append(req, hdr...)
	}
	if _, err := conn.Write(req); err != nil {
		fmt.Fprintf(os.Stderr, "toolgate: %s: sending the call to the gateway: %v\n", name, UnwrapOp(err))
		return ExitUnavailable
	}
	if stream {
		go sendStdin(conn, os.Stdin)
	}
	return readResponse(name, bufio.NewReaderSize(conn, 32<<10), os.Stdout, os.Stderr)
}

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

// stdinStreams decides whether the call gets our stdin: a pipe or a file
// does; a terminal or /dev/null (character devices) or a closed fd does not,
// so an interactive launcher never waits for input nobody will type.
func stdinStreams() bool {
	fi, err := os.Stdin.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice == 0
}

// sendStdin streams r as stdin frames, then the eof frame and the end of
// the chunked body. Errors end it quietly: the response says how the call went.
func sendStdin(w io.Writer, r io.Reader) {
	buf := make([]byte, 32<<10)
	frame := make([]byte, 0, base64.StdEncoding.EncodedLen(len(buf))+64)
	out := make([]byte, 0, cap(frame)+16)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			frame = append(frame[:0], `{"stdin":"`...)
			frame = base64.StdEncoding.AppendEncode(frame, buf[:n])
			frame = append(frame, "\"}\n"...)
			if _, werr := w.Write(appendChunk(out[:0], frame)); werr != nil {
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
		fmt.Fprintf(stderr, "toolgate: %s: connection to the gateway lost before it answered (gateway restarting?): %v\n", name, UnwrapOp(err))
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
			fmt.Fprintf(stderr, "toolgate: %s: reading from the gateway: %v\n", name, UnwrapOp(err))
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
			if f.Result.ExitCode != nil {
				return *f.Result.ExitCode
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

// unwrapOp drops the "dial unix /path:" prefix the message already has.
// UnwrapOp drops a net.OpError's wrapping, for messages people read.
func UnwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
