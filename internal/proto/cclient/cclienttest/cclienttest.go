// Package cclienttest is what the tests of the programs that talk to a
// gateway share: a gateway of one connection on a Unix socket, answered
// with canned bytes, and a runner that gives a program's exit status and
// output.
package cclienttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"testing"
)

// ServeOnce answers one connection on the Unix socket sock with answer
// (raw HTTP) and sends the request it read on the channel.
func ServeOnce(t testing.TB, sock, answer string) <-chan string {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		var req bytes.Buffer
		r, err := http.ReadRequest(bufio.NewReader(io.TeeReader(c, &req)))
		if err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		got <- req.String()
		_, _ = io.WriteString(c, answer)
		_ = c.(*net.UnixConn).CloseWrite()
	}()
	return got
}

// Run runs cmd (the launcher, the front, the in-sandbox client) and returns its exit status,
// stdout and stderr; an exit status is no failure, a program that did not
// run is.
func Run(t testing.TB, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}
