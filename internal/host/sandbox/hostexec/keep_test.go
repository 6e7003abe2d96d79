package hostexec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/guest"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// countingListener counts the connections an executor accepts.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// listenExecutor listens on the executor socket in dir (made anew, as an
// executor starting does) and counts what it accepts.
func listenExecutor(t *testing.T, dir string) *countingListener {
	t.Helper()
	ln, err := guest.ListenExecutor(filepath.Join(dir, proto.ExecSocketName))
	if err != nil {
		t.Fatal(err)
	}
	return &countingListener{Listener: ln}
}

// runEcho runs `cat; echo hi` on the executor in dir, with stdin when
// it is not nil, and checks what it printed.
func runEcho(t *testing.T, dir string, stdin []byte) {
	t.Helper()
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	var o, e bytes.Buffer
	res, err := Run(context.Background(), dir, os.Getuid(), &proto.ExecRequest{Argv: []string{"sh", "-c", "cat; echo hi"}}, in, &o, &e, 0)
	if want := string(stdin) + "hi\n"; err != nil || res.ExitCode != 0 || o.String() != want {
		t.Fatalf("got %v %+v %q %q, want %q", err, res, o.String(), e.String(), want)
	}
}

// TestRunKeepsConnection runs the real executor (guest.ServeExecutor)
// and counts its connections: calls without stdin share one; a call with
// stdin has its own; an executor started anew on a new socket is dialled,
// never reached through a connection to the one before; a connection the
// executor closed is given up and the call goes on a new one.
func TestRunKeepsConnection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serve := func(ln net.Listener, idle time.Duration) {
		srv := guest.ExecutorServer()
		if idle > 0 {
			srv.IdleTimeout = idle
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	ln := listenExecutor(t, dir)
	serve(ln, 0)

	for range 5 {
		runEcho(t, dir, nil)
	}
	if n := ln.n.Load(); n != 1 {
		t.Fatalf("5 calls without stdin took %d connections, want 1", n)
	}
	runEcho(t, dir, []byte("in\n"))
	runEcho(t, dir, nil)
	if n := ln.n.Load(); n != 2 {
		t.Fatalf("a call with stdin and one without took %d connections in all, want 2 (the kept one, and one for stdin)", n)
	}

	// A new executor (a sandbox made anew) on a new socket in the same
	// directory; the old one still serves its kept connection.
	ln2 := listenExecutor(t, dir)
	serve(ln2, 0)
	runEcho(t, dir, nil)
	if a, b := ln.n.Load(), ln2.n.Load(); a != 2 || b != 1 {
		t.Fatalf("after a new executor: old %d, new %d connections; want 2 and 1", a, b)
	}

	// The executor closes its idle connections: the kept one fails its
	// write and the call is made on a new one.
	ln3 := listenExecutor(t, dir)
	serve(ln3, 20*time.Millisecond)
	runEcho(t, dir, nil)
	time.Sleep(200 * time.Millisecond)
	runEcho(t, dir, nil)
	if n := ln3.n.Load(); n != 2 {
		t.Fatalf("with the kept connection closed by the executor: %d connections, want 2", n)
	}
}

// TestRunKeepsOnlyCleanEnds: a connection is kept only when the answer's
// end came with its exit frame and nothing after it, and the executor did
// not say it closes; otherwise the next call dials. The executor here is
// canned, to answer what a real one does not.
func TestRunKeepsOnlyCleanEnds(t *testing.T) {
	t.Parallel()
	exit := proto.ExitFrame(proto.ExecExit{ExitCode: 0})
	chunk := fmt.Sprintf("%x\r\n%s\r\n", len(exit), exit)
	head := "HTTP/1.1 200 OK\r\nContent-Type: " + proto.ExecFramesMedia + "\r\nTransfer-Encoding: chunked\r\n"
	tests := []struct {
		name  string
		parts []string // written with a pause between them
		conns int32    // for two calls
	}{
		{"end with the exit frame", []string{head + "\r\n" + chunk + "0\r\n\r\n"}, 1},
		{"bytes after the end", []string{head + "\r\n" + chunk + "0\r\n\r\nHTTP/1.1 200 OK\r\n"}, 2},
		{"end comes later", []string{head + "\r\n" + chunk, "0\r\n\r\n"}, 2},
		{"executor closes", []string{head + "Connection: close\r\n\r\n" + chunk + "0\r\n\r\n"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ln := listenExecutor(t, dir)
			probe.Serve(t, ln, func(c net.Conn) {
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					for i, p := range tt.parts {
						if i > 0 {
							time.Sleep(30 * time.Millisecond)
						}
						c.Write([]byte(p))
					}
				}
			})
			for range 2 {
				res, err := Run(context.Background(), dir, os.Getuid(), &proto.ExecRequest{Argv: []string{"x"}}, nil, io.Discard, io.Discard, 0)
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("got %v %+v", err, res)
				}
			}
			if n := ln.n.Load(); n != tt.conns {
				t.Errorf("two calls took %d connections, want %d", n, tt.conns)
			}
		})
	}
}

// TestRunCancelledNotKept: a call cancelled while it runs closes its
// connection (the executor then kills the call's group); the next call
// must not find it kept.
func TestRunCancelledNotKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ln := listenExecutor(t, dir)
	srv := guest.ExecutorServer()
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, dir, os.Getuid(), &proto.ExecRequest{Argv: []string{"sleep", "10"}}, nil, io.Discard, io.Discard, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled call: %v", err)
	}
	runEcho(t, dir, nil)
	if n := ln.n.Load(); n != 2 {
		t.Errorf("a cancelled call and the next took %d connections, want 2", n)
	}
}

// TestIdleConnsSwept: what no call took within idleFor is closed by a
// later put, whatever its directory.
func TestIdleConnsSwept(t *testing.T) {
	t.Parallel()
	p := &idleConns{m: map[string][]*execConn{}}
	pipe := func() (*execConn, net.Conn) {
		a, b := net.Pipe()
		ec := &execConn{conn: a, lim: &headLimit{r: a}}
		ec.reader()
		return ec, b
	}
	old, oldPeer := pipe()
	if !p.put("/gone", old) {
		t.Fatal("first put refused")
	}
	old.idle = time.Now().Add(-2 * idleFor) // not taken since
	p.swept = time.Now().Add(-2 * idleFor)
	young, _ := pipe()
	if !p.put("/busy", young) {
		t.Fatal("put refused")
	}
	if _, ok := p.m["/gone"]; ok {
		t.Errorf("stale directory still kept: %v", p.m)
	}
	oldPeer.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := oldPeer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("stale connection not closed: %v", err)
	}
	if len(p.m["/busy"]) != 1 {
		t.Errorf("fresh connection not kept: %v", p.m)
	}
	for range idlePerDir - 1 {
		ec, _ := pipe()
		if !p.put("/busy", ec) {
			t.Fatal("put under the limit refused")
		}
	}
	if ec, _ := pipe(); p.put("/busy", ec) {
		t.Errorf("kept more than %d for one directory", idlePerDir)
	}
}
