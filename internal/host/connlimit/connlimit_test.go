package connlimit_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/connlimit"
)

var short = connlimit.Timeouts{Header: 300 * time.Millisecond, Body: 300 * time.Millisecond, Idle: 300 * time.Millisecond}

// serve runs h behind connlimit.Server on a loopback port.
func serve(t *testing.T, h http.Handler, n int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := connlimit.Server(h, short, nil)
	go srv.Serve(connlimit.Listen(ln, n, nil))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// echoBody answers with the body it read.
var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestTimeout)
		return
	}
	w.Write(b)
})

// closedWithin reports whether the server ends c within d (reads until EOF
// or a reset; whatever it answered first is fine).
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestSlowClientsAreCut: a connection that dribbles its headers or its body,
// or idles between requests, loses its slot after the timeout.
func TestSlowClientsAreCut(t *testing.T) {
	addr := serve(t, echoBody, 16)
	for _, tc := range []struct{ name, send string }{
		{"slow headers", "POST / HTTP/1.1\r\nHost: x\r\n"},
		{"slow body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab"},
		{"slow chunked body", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n"},
		{"idle keep-alive", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.send); err != nil {
				t.Fatal(err)
			}
			if !closedWithin(c, 5*time.Second) {
				t.Fatal("the server still holds the connection 5s later")
			}
		})
	}
}

// TestStreamsAndLongCallsSurvive: a route marked Unbounded may stream its
// body past the body timeout, and a handler that runs long after reading its
// body is not cancelled by the lifted deadline.
func TestStreamsAndLongCallsSurvive(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/stream", connlimit.Unbounded(echoBody))
	mux.HandleFunc("/long", func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-time.After(4 * short.Body):
			fmt.Fprint(w, "done")
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
		}
	})
	addr := serve(t, mux, 16)

	pr, pw := io.Pipe()
	go func() {
		for i := range 4 {
			time.Sleep(short.Body / 2)
			fmt.Fprintf(pw, "%d", i)
		}
		pw.Close()
	}()
	resp, err := http.Post("http://"+addr+"/stream", "application/x-ndjson", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "0123" {
		t.Fatalf("stream: %d %q", resp.StatusCode, b)
	}

	resp, err = http.Post("http://"+addr+"/long", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "done" {
		t.Fatalf("long call: %d %q", resp.StatusCode, b)
	}
}

// TestCapHoldsFurtherConnectionsBack: past the cap the listener stops
// accepting; a slot freed lets the next one in. A shared pool caps two
// listeners together.
func TestCapHoldsFurtherConnectionsBack(t *testing.T) {
	pool := connlimit.NewPool(3)
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := connlimit.Listen(ln, 2, pool)
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { // answers one line, then holds the slot until the client leaves
					fmt.Fprintln(c, "hi")
					io.Copy(io.Discard, c)
					c.Close()
				}()
			}
		}()
		addrs = append(addrs, ln.Addr().String())
	}
	greeted := func(addr string) (net.Conn, bool) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = bufio.NewReader(c).ReadString('\n')
		c.SetReadDeadline(time.Time{})
		return c, err == nil
	}
	a1, ok1 := greeted(addrs[0])
	_, ok2 := greeted(addrs[0])
	a3, ok3 := greeted(addrs[0]) // over the listener's own cap
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("own cap 2: greeted %v %v %v", ok1, ok2, ok3)
	}
	a1.Close() // frees a slot: the waiting connection is accepted (its greeting was lost to the deadline)
	a3.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := bufio.NewReader(a3).ReadString('\n'); err != nil {
		t.Fatalf("a freed slot did not let the waiting connection in: %v", err)
	}
	_, okB1 := greeted(addrs[1]) // pool: 2 on the first listener, 1 here
	_, okB2 := greeted(addrs[1])
	if !okB1 || okB2 {
		t.Fatalf("shared pool of 3: second listener greeted %v %v", okB1, okB2)
	}
}

func TestPlan(t *testing.T) {
	for _, limit := range []uint64{64, 256, 1024, 4096, 20000, 1 << 20, 1 << 40} {
		b := connlimit.Plan(limit)
		sum := uint64(b.Admin + b.TCP + b.Agents)
		if sum >= limit || b.PerAgent > b.Agents || b.Admin <= 0 || b.TCP <= 0 || b.PerAgent <= 0 || b.PerSource <= 0 || b.PerSource*2 > b.TCP {
			t.Errorf("Plan(%d) = %+v: caps sum to %d", limit, b, sum)
		}
		if limit >= 1024 && limit-sum < 256 {
			t.Errorf("Plan(%d) = %+v keeps only %d descriptors in reserve", limit, b, limit-sum)
		}
	}
}
