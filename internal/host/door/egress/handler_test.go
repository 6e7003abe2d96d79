package egress_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/host/door/egress"
	"github.com/toolgate/toolgate/internal/host/door/egress/dnstest"
	"github.com/toolgate/toolgate/internal/host/door/egress/egresstest"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/netrule"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// tunnel is one CONNECT over the agent socket, as the forwarder sends it.
type tunnel struct {
	net.Conn
	r      *bufio.Reader
	status int
	err    *api.Error
}

func (c *tunnel) Read(p []byte) (int, error) { return c.r.Read(p) }

func connect(t testing.TB, sock, target, parent string) *tunnel {
	t.Helper()
	tn, err := dial(sock, target, parent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Close() })
	return tn
}

func dial(sock, target, parent string) (*tunnel, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	req := "CONNECT /v1/egress HTTP/1.1\r\nHost: toolgate\r\n"
	if target != "" {
		req += proto.HeaderTarget + ": " + target + "\r\n"
	}
	if parent != "" {
		req += proto.HeaderParent + ": " + parent + "\r\n"
	}
	tn := &tunnel{Conn: c, r: bufio.NewReader(c)}
	resp, err := func() (*http.Response, error) {
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			return nil, err
		}
		return http.ReadResponse(tn.r, &http.Request{Method: http.MethodConnect})
	}()
	if err != nil {
		c.Close()
		return nil, err
	}
	tn.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		var body struct{ Error *api.Error }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == nil {
			c.Close()
			return nil, fmt.Errorf("status %d without a wire error: %v", resp.StatusCode, err)
		}
		tn.err = body.Error
	}
	return tn, nil
}

// echoes checks that the tunnel carries msg both ways.
func echoes(t testing.TB, c *tunnel, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: %q, %v", buf, err)
	}
}

func answers(m map[string][]netip.Addr) func(string, uint16, int) []netip.Addr {
	return func(name string, _ uint16, _ int) []netip.Addr { return m[name] }
}

var loop = netip.MustParseAddr("127.0.0.1")

func TestTunnelAllowedAndAudited(t *testing.T) {
	port := egresstest.Echo(t, "127.0.0.1")
	env := egresstest.New(t, fmt.Sprintf(`agents:
  demo:
    egress: {allow: ["echo.test:%d"], private: allow}
`, port), answers(map[string][]netip.Addr{"echo.test": {loop}}))

	c := connect(t, env.SocketPath("demo"), fmt.Sprintf("Echo.Test.:%d", port), "0123abcd")
	if c.status != http.StatusOK {
		t.Fatalf("status %d: %v", c.status, c.err)
	}
	echoes(t, c, "ping through the gateway")
	c.Conn.(*net.UnixConn).CloseWrite()
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Fatalf("after half-close: %q, %v", rest, err)
	}

	env.WaitReleased(t, "demo")
	es := env.Egress(t)
	if len(es) != 2 {
		t.Fatalf("want decision and result, got %d entries", len(es))
	}
	dec, res := es[0], es[1]
	want := fmt.Sprintf("127.0.0.1:%d", port)
	for _, e := range es {
		if e.Agent != "demo" || e.Tool != egress.ToolName || e.Parent != "0123abcd" || e.Via != "egress" || e.Decision != "allow" || e.Rule != "egress.allow[0]" {
			t.Errorf("entry %+v", e)
		}
		if e.Detail["host"] != "echo.test" || e.Detail["peer"] == nil || fmt.Sprint(e.Detail["resolved"]) != "[127.0.0.1]" {
			t.Errorf("detail %v", e.Detail)
		}
	}
	if dec.Phase != gateway.PhaseDecision || dec.Detail["dialled"] != nil {
		t.Errorf("decision entry %+v", dec)
	}
	if res.Phase != gateway.PhaseResult || res.Error != "" || res.DurationMs == nil ||
		fmt.Sprint(res.Detail["dialled"]) != "["+want+"]" || res.Detail["remote"] != want ||
		res.Detail["bytesUp"] != float64(24) || res.Detail["bytesDown"] != float64(24) || res.Detail["tunnelMs"] == nil {
		t.Errorf("result entry %+v", res)
	}
}

func TestRefusals(t *testing.T) {
	port := egresstest.Echo(t, "127.0.0.1")
	closed := func() uint16 { // a port nobody listens on
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return uint16(ln.Addr().(*net.TCPAddr).Port)
	}()
	env := egresstest.New(t, fmt.Sprintf(`agents:
  demo:
    egress:
      private: deny
      allow: ["loop.test:%[1]d", "meta.test:80", "169.254.169.254:80", "[::ffff:a9fe:a9fe]:80", "mixed.test:443", "empty.test:443", "nx.test:443"]
  lab:
    egress:
      private: allow
      allow: ["loop.test:%[1]d", "mixed.test:443", "0x7f000001:%[1]d", "closed.test:%[2]d", "*.nat.test:80"]
  offline: {}
`, port, closed), answers(map[string][]netip.Addr{
		"loop.test":    {loop},
		"closed.test":  {loop},
		"meta.test":    {netip.MustParseAddr("169.254.169.254")},
		"mixed.test":   {netip.MustParseAddr("93.184.215.14"), loop},
		"x.nat.test":   {netip.MustParseAddr("64:ff9b::a9fe:a9fe")},
		"y.nat.test":   {netip.MustParseAddr("2002:a9fe:a9fe::")},
		"empty.test":   nil,
		"unasked.test": {loop},
	}))
	tests := []struct {
		name, agent, target string
		status              int
		rule                string
		entries             int // audit entries the attempt adds
	}{
		{"off the list", "demo", "unasked.test:443", 403, netrule.RuleAllowlist, 1},
		{"wrong port", "demo", fmt.Sprintf("loop.test:%d", port+1), 403, netrule.RuleAllowlist, 1},
		{"private answer", "demo", fmt.Sprintf("loop.test:%d", port), 403, netrule.RulePrivate, 1},
		{"metadata name", "demo", "meta.test:80", 403, netrule.RuleMetadata, 1},
		{"metadata literal", "demo", "169.254.169.254:80", 403, netrule.RuleMetadata, 1},
		{"metadata decimal", "demo", "2852039166:80", 403, netrule.RuleMetadata, 1},
		{"metadata octal", "demo", "0251.0376.0251.0376:80", 403, netrule.RuleMetadata, 1},
		{"metadata hex", "demo", "0xa9fea9fe:80", 403, netrule.RuleMetadata, 1},
		{"metadata mapped", "demo", "[::ffff:169.254.169.254]:80", 403, netrule.RuleMetadata, 1},
		{"metadata NAT64", "lab", "x.nat.test:80", 403, netrule.RuleMetadata, 1},
		{"metadata 6to4", "lab", "y.nat.test:80", 403, netrule.RuleMetadata, 1},
		{"mixed answer", "demo", "mixed.test:443", 403, netrule.RuleMixed, 1},
		{"mixed even with private", "lab", "mixed.test:443", 403, netrule.RuleMixed, 1},
		// Go's resolver reports an answer without addresses as "no such host".
		{"empty answer", "demo", "empty.test:443", 403, netrule.RuleResolve, 1},
		{"no egress", "offline", "loop.test:443", 403, netrule.RuleAllowlist, 1},
		{"without a port", "demo", "loop.test", 400, "args.invalid", 1},
		{"no target", "demo", "", 400, "args.invalid", 1},
		{"zone id", "lab", "[fe80::1%25eth0]:80", 400, "args.invalid", 1},
		{"userinfo", "lab", "user@loop.test:80", 400, "args.invalid", 1},
		{"300-character label", "lab", strings.Repeat("a", 300) + ".test:80", 400, "args.invalid", 1},
		{"dial fails", "lab", fmt.Sprintf("closed.test:%d", closed), 502, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(env.Egress(t))
			c := connect(t, env.SocketPath(tt.agent), tt.target, "")
			if c.status != tt.status || c.err == nil || c.err.Rule != tt.rule || c.err.ID == "" {
				t.Fatalf("status %d, error %+v; want %d by %q", c.status, c.err, tt.status, tt.rule)
			}
			es := env.Egress(t)
			if len(es)-before != tt.entries {
				t.Fatalf("%d new entries, want %d", len(es)-before, tt.entries)
			}
			last := es[len(es)-1]
			if last.ID != c.err.ID || last.Agent != tt.agent {
				t.Errorf("entry %+v for error %+v", last, c.err)
			}
			if tt.status == 502 {
				if last.Phase != gateway.PhaseResult || last.Decision != "allow" || last.Detail["dialError"] == nil || last.Error == "" {
					t.Errorf("dial failure entry %+v", last)
				}
				return
			}
			if last.Decision != "deny" || last.Rule != tt.rule || last.Reason == "" {
				t.Errorf("denial entry %+v", last)
			}
		})
	}
	// Names off the list were never looked up: no DNS channel out.
	if n := env.DNS.Count("unasked.test", dnstest.TypeA); n != 0 {
		t.Errorf("an unlisted name was resolved %d times", n)
	}
	// A literal in another spelling is the same destination.
	c := connect(t, env.SocketPath("lab"), fmt.Sprintf("127.0.0.1:%d", port), "")
	if c.status != http.StatusOK {
		t.Fatalf("hex-listed literal: %d %+v", c.status, c.err)
	}
	echoes(t, c, "x")
}

func TestRebindingIsPinned(t *testing.T) {
	port := egresstest.Echo(t, "127.0.0.1")
	// First answer: the "outside" (loopback, private allowed); every later
	// one: the metadata service. Each connection resolves exactly once and
	// uses that answer only.
	env := egresstest.New(t, fmt.Sprintf("agents:\n  demo:\n    egress: {allow: [\"rebind.test:%d\"], private: allow}\n", port),
		func(_ string, qtype uint16, n int) []netip.Addr {
			if qtype != dnstest.TypeA {
				return nil
			}
			if n == 0 {
				return []netip.Addr{loop}
			}
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}
		})
	target := fmt.Sprintf("rebind.test:%d", port)
	c := connect(t, env.SocketPath("demo"), target, "")
	if c.status != http.StatusOK {
		t.Fatalf("first: %d %+v", c.status, c.err)
	}
	echoes(t, c, "pinned")
	if n := env.DNS.Count("rebind.test", dnstest.TypeA); n != 1 {
		t.Fatalf("%d A queries for one connection", n)
	}
	c2 := connect(t, env.SocketPath("demo"), target, "")
	if c2.status != http.StatusForbidden || c2.err.Rule != netrule.RuleMetadata {
		t.Fatalf("rebound: %d %+v", c2.status, c2.err)
	}
	echoes(t, c, "still the first address") // the open tunnel never moved
}

func TestTunnelLimits(t *testing.T) {
	port := egresstest.Echo(t, "127.0.0.1")
	sink := func() uint16 { // accepts and never reads nor writes
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		return uint16(ln.Addr().(*net.TCPAddr).Port)
	}()
	env := egresstest.New(t, fmt.Sprintf(`agents:
  demo:
    egress: {allow: ["127.0.0.1:%d", "127.0.0.1:%d"], private: allow, maxConnections: 2, maxBytes: 1k, idleTimeout: 50ms}
  other:
    egress: {allow: ["127.0.0.1:%[1]d"], private: allow}
`, port, sink), nil)
	sock := env.SocketPath("demo")
	target := fmt.Sprintf("127.0.0.1:%d", port)

	t.Run("connections", func(t *testing.T) {
		a, b := connect(t, sock, target, ""), connect(t, sock, target, "")
		if a.status != 200 || b.status != 200 {
			t.Fatalf("statuses %d %d", a.status, b.status)
		}
		echoes(t, a, "a")
		echoes(t, b, "b")
		c := connect(t, sock, target, "")
		if c.status != http.StatusTooManyRequests || c.err.Rule != egress.RuleLimit || !strings.Contains(c.err.Message, "limit 2") {
			t.Fatalf("third: %d %+v", c.status, c.err)
		}
		es := env.Egress(t)
		if last := es[len(es)-1]; last.ID != c.err.ID || last.Decision != "deny" || last.Rule != egress.RuleLimit {
			t.Errorf("limit refusal entry %+v", last)
		}
		// Another agent's slots are its own.
		if o := connect(t, env.SocketPath("other"), target, ""); o.status != 200 {
			t.Errorf("other agent: %d %+v", o.status, o.err)
		}
		a.Close()
		b.Close()
		env.WaitReleased(t, "demo")
		if d := connect(t, sock, target, ""); d.status != 200 {
			t.Fatalf("after release: %d %+v", d.status, d.err)
		}
	})

	t.Run("bytes", func(t *testing.T) {
		c := connect(t, sock, target, "")
		if c.status != 200 {
			t.Fatalf("status %d", c.status)
		}
		go io.WriteString(c, strings.Repeat("x", 4096))
		n, _ := io.Copy(io.Discard, c)
		if n > 1024 {
			t.Errorf("%d bytes came back through a 1k tunnel", n)
		}
		env.WaitReleased(t, "demo")
		// This tunnel's result: the one cut at the byte limit (tunnels of
		// the test before may end, and be recorded, after it).
		var res *gateway.Entry
		for _, e := range env.Egress(t) {
			if e.Agent == "demo" && e.Phase == gateway.PhaseResult && e.Error == egress.ErrByteLimit.Error() {
				res = e
			}
		}
		if res == nil {
			t.Fatal("no result entry of a tunnel cut at the byte limit")
		}
		up, _ := res.Detail["bytesUp"].(float64)
		down, _ := res.Detail["bytesDown"].(float64)
		if res.Phase != gateway.PhaseResult || res.Error != egress.ErrByteLimit.Error() || up+down > 1024 {
			t.Errorf("result %+v", res)
		}
	})

	t.Run("silent peer", func(t *testing.T) {
		// The destination says nothing and the client says nothing: the
		// gateway ends the tunnel; neither can hold a slot for ever.
		c := connect(t, sock, fmt.Sprintf("127.0.0.1:%d", sink), "")
		if c.status != 200 {
			t.Fatalf("status %d", c.status)
		}
		if _, err := io.ReadAll(c); err != nil {
			t.Fatal(err)
		}
		env.WaitReleased(t, "demo")
		es := env.Egress(t)
		if res := es[len(es)-1]; res.Error != egress.ErrIdleTimeout.Error() {
			t.Errorf("result %+v", res)
		}
	})
}

func TestSocketBadInput(t *testing.T) {
	port := egresstest.Echo(t, "127.0.0.1")
	env := egresstest.New(t, fmt.Sprintf("agents:\n  demo:\n    egress: {allow: [\"127.0.0.1:%d\"], private: allow}\n", port), nil)
	sock := env.SocketPath("demo")

	t.Run("garbage instead of HTTP", func(t *testing.T) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("response %v, %v", resp, err)
		}
	})
	t.Run("other methods", func(t *testing.T) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /v1/egress HTTP/1.1\r\nHost: toolgate\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("response %v, %v", resp, err)
		}
	})
	t.Run("parent that is no call id", func(t *testing.T) {
		c := connect(t, sock, "evil.test:443", "../../etc/passwd")
		if c.status != http.StatusForbidden {
			t.Fatalf("status %d", c.status)
		}
		es := env.Egress(t)
		if p := es[len(es)-1].Parent; p != "" {
			t.Errorf("parent %q recorded", p)
		}
	})
	t.Run("eager client", func(t *testing.T) {
		// Bytes sent before the 200 (an eager TLS hello) reach the destination.
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT /v1/egress HTTP/1.1\r\nHost: toolgate\r\n%s: 127.0.0.1:%d\r\n\r\nearly", proto.HeaderTarget, port)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("response %v, %v", resp, err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "early" {
			t.Fatalf("echo %q, %v", buf, err)
		}
	})
	decisions := 0
	for _, e := range env.Egress(t) {
		if e.Phase == gateway.PhaseDecision {
			decisions++
		}
	}
	if decisions != 2 { // the parent and eager-client calls only
		t.Errorf("%d decisions for bad requests", decisions)
	}
}

// A client opening 10,000 connections at once: at most maxConnections are
// ever open, every attempt is answered and on the record, and nothing is
// left counted afterwards.
func TestManyConnections(t *testing.T) {
	const attempts, workers = 10000, 64
	port := egresstest.Echo(t, "127.0.0.1")
	env := egresstest.New(t, fmt.Sprintf("agents:\n  demo:\n    egress: {allow: [\"127.0.0.1:%d\"], private: allow, maxConnections: 8}\n", port), nil)
	sock := env.SocketPath("demo")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	statuses := make(chan int, attempts)
	jobs := make(chan int, attempts)
	for i := range attempts {
		jobs <- i
	}
	close(jobs)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1)
			for range jobs {
				c, err := dial(sock, target, "")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				peak = max(peak, env.Handler.Open("demo"))
				mu.Unlock()
				if c.status == 200 {
					_, ioErr := c.Write([]byte("x"))
					if ioErr == nil {
						_, ioErr = io.ReadFull(c, buf)
					}
					if ioErr != nil {
						t.Error(ioErr)
					}
				}
				c.Close()
				statuses <- c.status
			}
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[200]+count[429] != attempts || count[200] == 0 {
		t.Fatalf("statuses %v", count)
	}
	if peak > 8 {
		t.Errorf("%d tunnels open at once, limit 8", peak)
	}
	env.WaitReleased(t, "demo")
	// Each accepted tunnel has a decision and a result, each refusal one
	// entry or its count in a coalesced one.
	env.GW.FlushRefusals()
	n := 0
	for _, en := range env.Egress(t) {
		if en.Rule == gateway.RuleRefusalsCoalesced {
			c, _ := en.Detail["count"].(float64)
			n += int(c)
		} else {
			n++
		}
	}
	if n != 2*count[200]+count[429] {
		t.Fatalf("%d entries for %v", n, count)
	}
	t.Logf("statuses %v", count)
}
