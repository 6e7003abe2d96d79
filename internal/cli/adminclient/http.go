package adminclient

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The admin API speaks HTTP/1.1, one request per connection: this is the
// little of it a client needs, written by hand because net/http's client
// cost every CLI run ~0.7 ms of CPU (its initialisers, a transport with
// two goroutines per connection, cold code) against a call of ~2.5 ms.

// maxHead bounds a response's status line and headers, and its trailers:
// the gateway's are a few hundred bytes (a raw read's outcome trailer
// carries a small result).
const maxHead = 1 << 20

// request is one call to the admin API.
type request struct {
	method, path string
	header       []string // "Name: value"
	body         io.Reader
	size         int64 // of body; -1: unknown, sent chunked
	// duplex: the body is written while the answer is read (an exec's
	// stdin, whose command may answer it as it reads it).
	duplex bool
}

// set adds a header, refusing a value that would end the line early: the
// request would say something other than what the caller meant.
func (r *request) set(name, value string) error {
	if strings.ContainsFunc(value, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) {
		return fmt.Errorf("header %s: value holds a control character", name)
	}
	r.header = append(r.header, name+": "+value)
	return nil
}

// response is the answer read so far: status and headers; the body streams.
type response struct {
	status int
	reason string
	header map[string]string // lower-case names; a repeated name keeps the first
	body   io.ReadCloser
	// trailer is set once a chunked body has been read to its end.
	trailer map[string]string
}

func (r *response) statusText() string { return strconv.Itoa(r.status) + " " + r.reason }

// send writes req on conn and reads the answer's head. The connection is
// closed when the body is (or at once on error), and when ctx ends.
func send(ctx context.Context, conn net.Conn, host string, req *request) (*response, error) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	closeAll := func() { stop(); conn.Close() }
	if req.duplex {
		return sendDuplex(conn, host, req, closeAll, ctx)
	}
	werr := writeRequest(conn, host, req)
	var connErr *net.OpError
	if werr != nil && !errors.As(werr, &connErr) { // the body's source failed
		closeAll()
		return nil, werr
	}
	if werr != nil {
		// The server may have answered before reading the whole body (a
		// refusal) and closed: that answer is the outcome, not our broken
		// write. Half-closed, a server still reading sees the end.
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	resp, err := readResponse(bufio.NewReaderSize(conn, 32<<10))
	if err == nil && werr != nil && resp.status < 300 {
		err = werr
	}
	if err != nil {
		closeAll()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if werr != nil {
			return nil, werr
		}
		return nil, err
	}
	resp.body = &body{r: resp.body, close: closeAll, ctx: ctx}
	return resp, nil
}

// sendDuplex is send for a body written while the answer is read. A body
// whose source fails ends the call (the connection is closed: the gateway
// sees its input cut, and the command is ended) with that error; one the
// server stopped reading is the answer's to explain.
func sendDuplex(conn net.Conn, host string, req *request, closeAll func(), ctx context.Context) (*response, error) {
	// werr is set before the writer closes the connection, so a read that
	// fails because of it finds it. Nobody waits for the writer: it may be
	// blocked on its source (a terminal) long after the answer is in.
	var mu sync.Mutex
	var werr error
	go func() {
		var connErr *net.OpError
		if err := writeRequest(conn, host, req); err != nil && !errors.As(err, &connErr) {
			mu.Lock()
			werr = err
			mu.Unlock()
			closeAll()
		}
	}()
	failed := func(err error) error {
		closeAll()
		mu.Lock()
		defer mu.Unlock()
		return cmp.Or(werr, ctx.Err(), err)
	}
	resp, err := readResponse(bufio.NewReaderSize(conn, 32<<10))
	if err != nil {
		return nil, failed(err)
	}
	resp.body = &body{r: &duplexBody{r: resp.body, failed: failed}, close: closeAll, ctx: ctx}
	return resp, nil
}

// duplexBody is an answer whose request body may fail while it is read:
// a read that fails says the body's error, which caused it.
type duplexBody struct {
	r      io.Reader
	failed func(error) error
}

func (d *duplexBody) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && err != io.EOF {
		err = d.failed(err)
	}
	return n, err
}

// writeRequest sends the head and, for a body of known size up to a few
// KiB, the body in one write: one syscall for a typical call.
func writeRequest(w io.Writer, host string, req *request) error {
	var b strings.Builder
	b.WriteString(req.method + " " + req.path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n")
	for _, h := range req.header {
		b.WriteString(h + "\r\n")
	}
	if req.size < 0 {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	} else {
		b.WriteString("Content-Length: " + strconv.FormatInt(req.size, 10) + "\r\n\r\n")
	}
	if req.size > 0 && req.size <= 16<<10 {
		n := b.Len()
		if _, err := io.CopyN(&b, req.body, req.size); err != nil {
			return fmt.Errorf("request body: %d bytes of %d: %w", b.Len()-n, req.size, err)
		}
		if err := noMore(req); err != nil {
			return err
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	switch {
	case req.size < 0:
		cw := &chunkWriter{w: w}
		if _, err := io.Copy(cw, req.body); err != nil {
			return err
		}
		_, err := io.WriteString(w, "0\r\n\r\n")
		return err
	case req.size > 0:
		if n, handled, err := sendFile(w, req.body, req.size); handled {
			if err != nil {
				return fmt.Errorf("request body: %d bytes of %d: %w", n, req.size, err)
			}
			return noMore(req)
		}
		if n, err := io.CopyN(w, req.body, req.size); err != nil {
			return fmt.Errorf("request body: %d bytes of %d: %w", n, req.size, err)
		}
		return noMore(req)
	}
	return nil
}

// sendFile sends size bytes of a file body — an *os.File, or one cut by
// io.LimitReader, as toolgate write sends a file — from where the file
// stands onto a socket inside the kernel (sendfile(2)): 256 MiB no longer
// pass through this process (~0.06 CPU-s). It leaves the file and the
// limit where a copy would. handled is false, with nothing sent, when the
// body or w is something else, or the kernel cannot send this file. A
// failure (of the socket; rarely, of reading the file) is a *net.OpError,
// as a write's, so that send still hears a server that answered before it
// took the whole body.
func sendFile(w io.Writer, body io.Reader, size int64) (n int64, handled bool, err error) {
	src, lr := body, (*io.LimitedReader)(nil)
	if l, ok := body.(*io.LimitedReader); ok {
		if l.N < size {
			return 0, false, nil
		}
		src, lr = l.R, l
	}
	f, fok := src.(*os.File)
	conn, cok := w.(interface {
		net.Conn
		syscall.Conn
	})
	if !fok || !cok {
		return 0, false, nil
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	in := int(f.Fd())
	var serr error
	werr := rc.Write(func(out uintptr) bool {
		for n < size {
			// nil offset: from the file's position, which it advances.
			m, e := syscall.Sendfile(int(out), in, nil, int(min(size-n, 1<<30)))
			n += int64(max(m, 0))
			switch {
			case errors.Is(e, syscall.EAGAIN):
				return false // wait until the socket takes more
			case errors.Is(e, syscall.EINTR):
			case e != nil:
				serr = e
				return true
			case m == 0:
				serr = io.ErrUnexpectedEOF // the file ended before size
				return true
			}
		}
		return true
	})
	if lr != nil {
		lr.N -= n
	}
	switch {
	case n == 0 && (errors.Is(serr, syscall.EINVAL) || errors.Is(serr, syscall.ENOSYS)):
		return 0, false, nil // a file sendfile cannot read: copied instead
	case errors.Is(serr, io.ErrUnexpectedEOF):
		return n, true, serr
	case serr == nil && werr != nil:
		serr = werr
	case serr != nil:
		serr = os.NewSyscallError("sendfile", serr)
	}
	if serr != nil {
		return n, true, &net.OpError{Op: "write", Net: conn.LocalAddr().Network(), Addr: conn.RemoteAddr(), Err: serr}
	}
	return n, true, nil
}

// noMore fails when the body holds more than its stated size: the caller
// said how much it sends, and the server would take the rest as garbage.
func noMore(req *request) error {
	if n, _ := io.ReadFull(req.body, make([]byte, 1)); n > 0 {
		return fmt.Errorf("request body longer than its stated %d bytes", req.size)
	}
	return nil
}

type chunkWriter struct{ w io.Writer }

func (c *chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if _, err := io.WriteString(c.w, strconv.FormatInt(int64(len(p)), 16)+"\r\n"); err != nil {
		return 0, err
	}
	if _, err := c.w.Write(p); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(c.w, "\r\n"); err != nil {
		return 0, err
	}
	return len(p), nil
}

// readResponse reads a response's head from br and sets up its body:
// chunked, of a Content-Length, or to the connection's end.
func readResponse(br *bufio.Reader) (*response, error) {
	budget := maxHead
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		proto, rest, _ := strings.Cut(line, " ")
		code, reason, _ := strings.Cut(rest, " ")
		status, err := strconv.Atoi(code)
		if !strings.HasPrefix(proto, "HTTP/1.") || len(code) != 3 || err != nil || status < 100 {
			return nil, fmt.Errorf("malformed answer: status line %q", line)
		}
		header, err := readFields(br, &budget)
		if err != nil {
			return nil, err
		}
		if status < 200 { // 100 Continue and the like precede the answer
			continue
		}
		resp := &response{status: status, reason: reason, header: header}
		te, hasLength := header["transfer-encoding"], header["content-length"]
		switch {
		case te != "" && !strings.EqualFold(te, "chunked"):
			return nil, fmt.Errorf("malformed answer: transfer encoding %q", te)
		case te != "":
			resp.body = io.NopCloser(&chunkReader{br: br, resp: resp})
		case hasLength != "":
			n, err := strconv.ParseInt(hasLength, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("malformed answer: content length %q", hasLength)
			}
			resp.body = io.NopCloser(&exactReader{r: br, n: n})
		case status == 204 || status == 304:
			resp.body = io.NopCloser(strings.NewReader(""))
		default:
			resp.body = io.NopCloser(br)
		}
		return resp, nil
	}
}

// readFields reads header (or trailer) lines up to the empty line.
func readFields(br *bufio.Reader, budget *int) (map[string]string, error) {
	fields := map[string]string{}
	for {
		line, err := readLine(br, budget)
		if err != nil {
			return nil, fmt.Errorf("reading the answer's header: %w", err)
		}
		if line == "" {
			return fields, nil
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("malformed answer: header line %q", line)
		}
		name = strings.ToLower(name)
		if _, seen := fields[name]; !seen {
			fields[name] = strings.TrimSpace(value)
		}
	}
}

var errHeadTooLong = errors.New("header over 1 MiB")

// readLine reads one CRLF- (or LF-) terminated line, charged to budget.
func readLine(br *bufio.Reader, budget *int) (string, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(line)+len(part) > *budget {
			return "", errHeadTooLong
		}
		line = append(line, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return "", io.ErrUnexpectedEOF
		}
		if err != nil {
			return "", err
		}
		*budget -= len(line)
		line = line[:len(line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return string(line), nil
	}
}

// chunkReader decodes a chunked body; its trailers go to resp.trailer.
type chunkReader struct {
	br     *bufio.Reader
	resp   *response
	left   int64 // of the current chunk
	inside bool  // a chunk was started: its CRLF is due before the next size
	err    error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left == 0 {
		if c.err = c.next(); c.err != nil {
			return 0, c.err
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	c.err = err
	return n, err
}

// next reads the end of the previous chunk and the size of the next; at
// the last chunk, the trailers, then io.EOF.
func (c *chunkReader) next() error {
	budget := maxHead
	if c.inside {
		if line, err := readLine(c.br, &budget); err != nil || line != "" {
			return errors.New("malformed answer: chunk not followed by its line end")
		}
	}
	line, err := readLine(c.br, &budget)
	if err != nil {
		return err
	}
	size, _, _ := strings.Cut(line, ";") // extensions mean nothing to us
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("malformed answer: chunk size %q", line)
	}
	if n == 0 {
		if c.resp.trailer, err = readFields(c.br, &budget); err != nil {
			return err
		}
		return io.EOF
	}
	c.left, c.inside = n, true
	return nil
}

// exactReader reads a body of a stated length, failing if it ends sooner.
type exactReader struct {
	r io.Reader
	n int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= int64(n)
	if err == io.EOF && e.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// body is a response body over its connection: closing it closes the
// connection; a read that fails because ctx ended says so.
type body struct {
	r     io.Reader
	close func()
	ctx   context.Context
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.ctx.Err() != nil {
		err = b.ctx.Err()
	}
	return n, err
}

func (b *body) Close() error {
	b.close()
	return nil
}
