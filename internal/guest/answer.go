package guest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The hook client's reading of the gateway's HTTP/1.1 answers on the agent
// socket: a plain reader over one connection, no net/http, so a hook (run
// by Claude Code before and after every tool) starts and answers fast.

// respError is the gateway's JSON error body.
type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Rule    string `json:"rule"`
	ID      string `json:"id"`
}

// answerBody is the body after a head readHead read from r: chunked, of
// the length it stated, or to the end.
func answerBody(r *bufio.Reader, chunked bool, length int64) io.Reader {
	switch {
	case chunked:
		return &chunkedReader{r: r}
	case length >= 0:
		return io.LimitReader(r, length)
	}
	return r
}

// readHead reads an HTTP/1.1 response head: the status, whether the body
// is chunked, and its length (-1 when not given).
func readHead(r *bufio.Reader) (status int, chunked bool, length int64, err error) {
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
type chunkedReader struct {
	r    *bufio.Reader
	left int64
	done bool
}

func (c *chunkedReader) Read(p []byte) (int, error) {
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
