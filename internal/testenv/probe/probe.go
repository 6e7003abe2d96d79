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
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}
