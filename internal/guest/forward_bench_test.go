package guest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/door/egress/egresstest"
	"github.com/toolgate/toolgate/internal/testenv/probe"
)

const benchChunk = 1 << 20

// source serves downloads: a client sends "N\n" and gets N MiB, then EOF.
func source(b *testing.B) uint16 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, benchChunk)
	probe.Serve(b, ln, func(c net.Conn) {
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return
		}
		n, _ := strconv.Atoi(line[:len(line)-1])
		for range n {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func benchEnv(b *testing.B, port uint16) (*egresstest.Env, string) {
	env := egresstest.New(b, fmt.Sprintf("agents:\n  demo:\n    egress: {allow: [\"bench.test:%d\"], private: allow}\n", port),
		func(_ string, qtype uint16, _ int) []netip.Addr {
			if qtype != 1 {
				return nil
			}
			return []netip.Addr{loopback}
		})
	return env, forwarder(b, env.SocketPath("demo"))
}

// proxied opens a tunnel to bench.test:port through the forwarder.
func proxied(b *testing.B, proxy string, port uint16) (net.Conn, *bufio.Reader) {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT bench.test:%d HTTP/1.1\r\nHost: x\r\n\r\n", port)
	br := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c, br
}

func download(b *testing.B, c net.Conn, r io.Reader) {
	b.SetBytes(benchChunk)
	b.ResetTimer()
	fmt.Fprintf(c, "%d\n", b.N)
	if n, err := io.Copy(io.Discard, r); err != nil || n != int64(b.N)*benchChunk {
		b.Fatalf("got %d bytes, %v", n, err)
	}
}

// Bulk download straight from a loopback server, for comparison.
func BenchmarkDownloadDirect(b *testing.B) {
	port := source(b)
	c, err := net.Dial("tcp", netip.AddrPortFrom(loopback, port).String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	download(b, c, c)
}

// Bulk download through forwarder → agent socket → gateway tunnel.
func BenchmarkDownloadForwarder(b *testing.B) {
	port := source(b)
	_, proxy := benchEnv(b, port)
	c, br := proxied(b, proxy, port)
	defer c.Close()
	download(b, c, br)
}

// Connection set-up: connect, one byte there and back, close. Through the
// forwarder each includes the decision, the durable audit entry, the
// resolution, the dial and the result entry.
func BenchmarkSetupDirect(b *testing.B) {
	port := egresstest.Echo(b, "127.0.0.1")
	addr := netip.AddrPortFrom(loopback, port).String()
	setup(b, func() (net.Conn, io.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		return c, c
	})
}

func BenchmarkSetupForwarder(b *testing.B) {
	port := egresstest.Echo(b, "127.0.0.1")
	env, proxy := benchEnv(b, port)
	setup(b, func() (net.Conn, io.Reader) { return proxied(b, proxy, port) })
	env.WaitReleased(b, "demo") // the last result entry, before the audit closes
}

func setup(b *testing.B, open func() (net.Conn, io.Reader)) {
	lat := make([]time.Duration, 0, b.N)
	buf := make([]byte, 1)
	for b.Loop() {
		start := time.Now()
		c, r := open()
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		c.Close()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
