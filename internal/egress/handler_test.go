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
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/egress"
	"github.com/toolgate/toolgate/internal/egress/dnstest"
	"github.com/toolgate/toolgate/internal/egress/egresstest"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/wire"
)

// tunnel is one CONNECT over the agent socket, as the forwarder sends it.
type tunnel struct {
	net.Conn
	r      *bufio.Reader
	status int
	err    *wire.Error
}

func (c *tunnel) Read(p []byte) (int, error) { return c.r.Read(p) }

func connect(t testing.TB, sock, target, parent string) *tunnel {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "CONNECT /v1/egress HTTP/1.1\r\nHost: toolgate\r\n"
	if target != "" {
		req += egress.HeaderTarget + ": " + target + "\r\n"
	}
	if parent != "" {
		req += egress.HeaderParent + ": " + parent + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	tn := &tunnel{Conn: c, r: bufio.NewReader(c)}
	resp, err := http.ReadResponse(tn.r, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	tn.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		var body struct{ Error *wire.Error }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == nil {
			t.Fatalf("status %d without a wire error: %v", resp.StatusCode, err)
		}
		tn.err = body.Error
	}
	return tn
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

	released(t, env, "demo")
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

// released waits for the agent's tunnel slots to be given back: the client
// sees the tunnel close a moment before the result entry is written and the
// handler releases its slot.
func released(t testing.TB, env *egresstest.Env, agent string) {
	t.Helper()
	for i := 0; env.Handler.Open(agent) != 0; i++ {
		if i == 5000 {
			t.Fatalf("%d tunnels still counted", env.Handler.Open(agent))
		}
		time.Sleep(time.Millisecond)
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
		{"off the list", "demo", "unasked.test:443", 403, egress.RuleAllowlist, 1},
		{"wrong port", "demo", fmt.Sprintf("loop.test:%d", port+1), 403, egress.RuleAllowlist, 1},
		{"private answer", "demo", fmt.Sprintf("loop.test:%d", port), 403, egress.RulePrivate, 1},
		{"metadata name", "demo", "meta.test:80", 403, egress.RuleMetadata, 1},
		{"metadata literal", "demo", "169.254.169.254:80", 403, egress.RuleMetadata, 1},
		{"metadata decimal", "demo", "2852039166:80", 403, egress.RuleMetadata, 1},
		{"metadata octal", "demo", "0251.0376.0251.0376:80", 403, egress.RuleMetadata, 1},
		{"metadata hex", "demo", "0xa9fea9fe:80", 403, egress.RuleMetadata, 1},
		{"metadata mapped", "demo", "[::ffff:169.254.169.254]:80", 403, egress.RuleMetadata, 1},
		{"metadata NAT64", "lab", "x.nat.test:80", 403, egress.RuleMetadata, 1},
		{"metadata 6to4", "lab", "y.nat.test:80", 403, egress.RuleMetadata, 1},
		{"mixed answer", "demo", "mixed.test:443", 403, egress.RuleMixed, 1},
		{"mixed even with private", "lab", "mixed.test:443", 403, egress.RuleMixed, 1},
		// Go's resolver reports an answer without addresses as "no such host".
		{"empty answer", "demo", "empty.test:443", 403, egress.RuleResolve, 1},
		{"no egress", "offline", "loop.test:443", 403, egress.RuleAllowlist, 1},
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
