package proto

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestSendBuffer: both ends of a Unix connection get the send buffer
// asked for, as far as net.core.wmem_max allows (the kernel reports twice
// what it grants).
func TestSendBuffer(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("/proc/sys/net/core/wmem_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := 2 * min(SendBuffer, max)
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sl := SendBufferListener{ln}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := sl.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	dialled, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialled.Close()
	before := sndbuf(t, dialled)
	GrowSendBuffer(dialled)
	server := <-accepted
	defer server.Close()
	for name, c := range map[string]net.Conn{"dialled": dialled, "accepted": server} {
		if got := sndbuf(t, c); got != want {
			t.Errorf("%s: send buffer %d, want %d (was %d before)", name, got, want, before)
		}
	}
}

func sndbuf(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return n
}
