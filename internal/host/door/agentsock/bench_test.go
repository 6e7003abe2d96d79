package agentsock_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/door/agentsock/sockettest"
)

// BenchmarkCallEcho is one echo call over the socket on a kept-alive
// connection: protocol + pipeline + two durable audit entries, no process start.
func BenchmarkCallEcho(b *testing.B) {
	env := sockettest.New(b, sockettest.Allowlist{"a": {"echo"}})
	env.Serve(b, "a")
	c := httpClient(env.SocketPath("a"))
	b.ResetTimer()
	for b.Loop() {
		echo(b, c)
	}
}

// BenchmarkConcurrent64 is 64 callers spread over 4 agents' sockets; every
// call is audited and the chain must verify afterwards.
func BenchmarkConcurrent64(b *testing.B) {
	agents := sockettest.Allowlist{"a0": {"echo"}, "a1": {"echo"}, "a2": {"echo"}, "a3": {"echo"}}
	env := sockettest.New(b, agents)
	env.Serve(b, "a0", "a1", "a2", "a3")
	clients := make([]*http.Client, 4)
	for i := range clients {
		clients[i] = httpClient(env.SocketPath(fmt.Sprintf("a%d", i)))
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := (b.N + 63) / 64
	for g := range 64 {
		wg.Go(func() {
			for range per {
				echo(b, clients[g%4])
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(per*64)/time.Since(start).Seconds(), "calls/s")
	b.StopTimer()
	if err := env.Audit.Close(); err != nil {
		b.Fatal(err)
	}
	if n := len(env.Entries(b)); n != 2*per*64 {
		b.Fatalf("%d audit entries for %d calls", n, per*64)
	}
	rep, err := audit.Verify(env.AuditDir)
	if err != nil || !rep.OK() {
		b.Fatalf("audit chain: %v %+v", err, rep)
	}
}

func echo(b *testing.B, c *http.Client) {
	resp, err := c.Post("http://toolgate/v1/tools/echo/call", "application/json", strings.NewReader(`{"argv":["hi"]}`))
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"exitCode":0`) {
		b.Fatalf("%d %s", resp.StatusCode, body)
	}
}
