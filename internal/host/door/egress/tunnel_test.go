package egress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns two ends of one loopback TCP connection.
func tcpPair(t testing.TB) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

type tunnelResult struct {
	st  Stats
	err error
}

// startTunnel wires app ⇄ [client end | Tunnel | upstream end] ⇄ server and
// returns the application's end, the server's end and the tunnel's outcome.
func startTunnel(t *testing.T, ctx context.Context, l Limits) (app, server *net.TCPConn, res chan tunnelResult) {
	app, client := tcpPair(t)
	upstream, server := tcpPair(t)
	res = make(chan tunnelResult, 1)
	go func() {
		st, err := Tunnel(ctx, client, upstream, l)
		res <- tunnelResult{st, err}
	}()
	return app, server, res
}

func TestTunnelCopiesBothWaysAndHalfCloses(t *testing.T) {
	app, server, res := startTunnel(t, context.Background(), Limits{})
	app.Write([]byte("hello"))
	app.CloseWrite()
	got, err := io.ReadAll(server) // EOF arrives once the client half-closed
	if err != nil || string(got) != "hello" {
		t.Fatalf("server read %q, %v", got, err)
	}
	server.Write([]byte("world, bye"))
	server.CloseWrite()
	got, err = io.ReadAll(app)
	if err != nil || string(got) != "world, bye" {
		t.Fatalf("app read %q, %v", got, err)
	}
	r := <-res
	if r.err != nil || r.st.Up != 5 || r.st.Down != 10 {
		t.Errorf("tunnel = %+v", r)
	}
}

func TestTunnelIdleTimeoutCutsSilentPeers(t *testing.T) {
	app, server, res := startTunnel(t, context.Background(), Limits{IdleTimeout: 50 * time.Millisecond})
	r := <-res
	if !errors.Is(r.err, ErrIdleTimeout) {
		t.Fatalf("err = %v", r.err)
	}
	// Both ends see the tunnel gone.
	for _, c := range []net.Conn{app, server} {
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("read after idle: %d, %v", n, err)
		}
	}
}

// A download with a silent client is not idle: bytes flow the other way.
func TestTunnelOneWayTrafficIsNotIdle(t *testing.T) {
	// Gaps of a tenth of the idle timeout, with room for a loaded machine.
	idle := time.Second
	app, server, res := startTunnel(t, context.Background(), Limits{IdleTimeout: idle})
	go func() {
		for range 15 { // 15 × 100 ms spans well past one idle timeout
			server.Write(bytes.Repeat([]byte("x"), 100))
			time.Sleep(idle / 10)
		}
		server.Close()
	}()
	got, _ := io.ReadAll(app)
	app.Close()
	r := <-res
	if len(got) != 1500 || r.st.Down != 1500 || errors.Is(r.err, ErrIdleTimeout) {
		t.Errorf("got %d bytes, tunnel %+v: %v", len(got), r.st, r.err)
	}
}

// A client that stops reading cannot pin the tunnel: writes to it time out.
func TestTunnelNonReadingClient(t *testing.T) {
	_, server, res := startTunnel(t, context.Background(), Limits{IdleTimeout: 100 * time.Millisecond})
	go func() {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := server.Write(chunk); err != nil {
				return
			}
		}
	}()
	if r := <-res; !errors.Is(r.err, ErrIdleTimeout) {
		t.Errorf("tunnel = %+v", r)
	}
}

func TestTunnelByteLimit(t *testing.T) {
	app, server, res := startTunnel(t, context.Background(), Limits{MaxBytes: 1000})
	go server.Write(make([]byte, 5000))
	got, _ := io.ReadAll(app)
	r := <-res
	if !errors.Is(r.err, ErrByteLimit) || len(got) != 1000 || r.st.Up+r.st.Down != 1000 {
		t.Errorf("got %d bytes, tunnel %+v: %v", len(got), r.st, r.err)
	}
}

func TestTunnelContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	app, _, res := startTunnel(t, ctx, Limits{})
	app.Write([]byte("x"))
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Errorf("tunnel = %+v", r)
	}
}

// The byte limit counts both directions together even when both have data
// at once: bytes already waiting on each side when the tunnel starts must
// not each be let through against the same remaining allowance.
func TestTunnelByteLimitBothWays(t *testing.T) {
	for range 200 { // the race needs both pipes reading at once
		app, client := tcpPair(t)
		upstream, server := tcpPair(t)
		app.Write(make([]byte, 1000))
		server.Write(make([]byte, 1000))
		st, err := Tunnel(context.Background(), client, upstream, Limits{MaxBytes: 1000})
		app.SetReadDeadline(time.Now().Add(5 * time.Second))
		server.SetReadDeadline(time.Now().Add(5 * time.Second))
		toApp, _ := io.ReadAll(app)
		toServer, _ := io.ReadAll(server)
		app.Close()
		server.Close()
		if !errors.Is(err, ErrByteLimit) || st.Up+st.Down > 1000 || len(toApp)+len(toServer) > 1000 {
			t.Fatalf("carried %d up, %d down (stats %+v, %v) through a 1000-byte tunnel", len(toServer), len(toApp), st, err)
		}
	}
}
