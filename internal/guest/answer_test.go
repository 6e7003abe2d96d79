package guest

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// Whatever the gateway answers a hook, reading it ends: an error or a body
// of at most what the head promised, no panic, no hang.
func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 403 Forbidden\r\n\r\n{\"error\":{\"code\":\"denied\"}}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n",
		"garbage",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(b), 4<<10)
		_, chunked, length, err := readHead(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(io.LimitReader(answerBody(br, chunked, length), 1<<20))
		if !chunked && length >= 0 && int64(len(body)) > length {
			t.Fatalf("read %d bytes of a body of %d", len(body), length)
		}
	})
}
