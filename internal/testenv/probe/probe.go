// Package probe holds test helpers with no dependency on the rest of the
// tree — a counting listener, the check of what a binary links — so any
// package's tests can use them, the sandbox backends' too (testenv imports
// the backends).
package probe

import (
	"net"
	"sync/atomic"
	"testing"
)

// ListenCounting serves a Unix socket at path and counts its connections:
// a stand-in for a socket the gateway must never be steered to.
func ListenCounting(t testing.TB, path string) *atomic.Int64 {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	Serve(t, ln, func(net.Conn) { n.Add(1) })
	return &n
}

// Serve accepts on ln until the test ends (when it closes ln) and runs
// serve on each connection in a goroutine of its own, closing the
// connection when serve returns: a test's stand-in server.
func Serve(t testing.TB, ln net.Listener, serve func(net.Conn)) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
}
