package connlimit_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/connlimit"
)

func TestSource(t *testing.T) {
	for _, c := range []struct {
		remote net.Addr
		want   string
	}{
		{tcp("127.0.0.1:4000"), connlimit.Local},
		{tcp("127.31.7.9:1"), connlimit.Local}, // any loopback address a local user binds
		{tcp("[::1]:1"), connlimit.Local},
		{tcp("[::ffff:127.0.0.2]:1"), connlimit.Local},
		{tcp("192.0.2.7:1"), "192.0.2.7"},
		{tcp("[::ffff:192.0.2.7]:9"), "192.0.2.7"},
		{tcp("[2001:db8::1]:1"), "2001:db8::/64"},
		{tcp("[2001:db8::ffff:1:2]:2"), "2001:db8::/64"}, // one host's /64 is one source
		{tcp("[2001:db8:0:1::1]:1"), "2001:db8:0:1::/64"},
		{&net.UnixAddr{Name: "@", Net: "unix"}, "@"},
	} {
		if got := connlimit.Source(c.remote); got != c.want {
			t.Errorf("Source(%v) = %q, want %q", c.remote, got, c.want)
		}
		if got := connlimit.SourceOf(c.remote.String()); got != c.want {
			t.Errorf("SourceOf(%q) = %q, want %q", c.remote, got, c.want)
		}
	}
	// The host's own addresses are this host's users too.
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || p.Addr().IsLoopback() {
			continue
		}
		hp := netip.AddrPortFrom(p.Addr(), 5555).String()
		if got := connlimit.SourceOf(hp); got != connlimit.Local {
			t.Errorf("the host's own %s: %q", hp, got)
		}
	}
}

func tcp(s string) *net.TCPAddr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }

// TestSourceLimit: a source at its limit makes room by closing its oldest
// connection that carries no request, so idle and half-open connections do
// not lock out its next request; with all of its connections in a request
// (a stream, a hijacked connection) its next one is closed unanswered and
// reported; once one ends, the source is served again.
func TestSourceLimit(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	hijacked := make(chan struct{})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, r *http.Request) {
		defer close(hijacked)
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\n\r\n")
		buf.Flush()
		go func() { <-release; c.Close() }() // the handler returns; the connection lives on
	})
	type refusal struct {
		source string
		open   int
	}
	refused := make(chan refusal, 16)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := connlimit.Server(mux, connlimit.Defaults, nil)
	const limit = 3
	go srv.Serve(connlimit.Listen(ln, 64, nil).LimitSources(connlimit.NewSources(limit, func(source string, remote net.Addr, open int) {
		refused <- refusal{source, open}
	})))
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// get sends a request on a new connection and returns the status line
	// ("" when the connection was closed unanswered).
	get := func(path string) (net.Conn, string) {
		c := dial()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if isTimeout(err) {
			t.Fatalf("GET %s: no answer and not closed", path)
		}
		c.SetReadDeadline(time.Time{})
		return c, strings.TrimSpace(line)
	}

	for range 50 { // half-open: connected, nothing sent
		dial()
	}
	idle, status := get("/ok") // and one idle between requests, kept alive
	if status != "HTTP/1.1 200 OK" {
		t.Fatalf("under 50 half-open connections of its own: %q", status)
	}
	_ = idle
	for _, p := range []string{"/hold", "/hijack", "/hold"} {
		if _, status := get(p); status != "HTTP/1.1 200 OK" {
			t.Fatalf("GET %s with the source's other connections idle: %q", p, status)
		}
	}
	<-hijacked // its handler has returned: the connection is in use all the same
	if _, status := get("/ok"); status != "" {
		t.Fatalf("a fourth connection with three in requests: %q, want it closed", status)
	}
	select {
	case r := <-refused:
		if r != (refusal{connlimit.Local, limit}) {
			t.Errorf("reported %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the refusal was not reported")
	}
	close(release)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, status := get("/ok"); status == "HTTP/1.1 200 OK" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after the requests ended: %q", status)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestBoundedAnswerCutsSlowReaders: a client that asks for a bounded
// answer and stops reading loses the connection after the bound, so it
// cannot keep a connection in a request that way.
func TestBoundedAnswerCutsSlowReaders(t *testing.T) {
	big := strings.Repeat("m", 8<<20) // past any socket buffer
	served := make(chan error, 1)
	mux := http.NewServeMux()
	mux.Handle("/metrics", connlimit.Bounded(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.WriteString(w, big)
		served <- err
	}), 300*time.Millisecond))
	addr := serve(t, mux, 16)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(1) // the smallest window the kernel allows
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-served:
		if err == nil {
			t.Fatal("8 MiB written to a client that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the answer's writer still waits for the client 10 s later")
	}
}
