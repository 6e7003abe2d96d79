package guest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/door/egress/egresstest"
	"github.com/toolgate/toolgate/internal/proto"
)

// A loopback target is the sandbox's own service unless the egress
// allowlist names it as the host's: then, and only then, it goes to the
// gateway (which NO_PROXY=localhost would have prevented).
func TestForwardLoopback(t *testing.T) {
	serve := func(name string) *url.URL {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) }))
		t.Cleanup(s.Close)
		u, _ := url.Parse(s.URL)
		return u
	}
	own, host := serve("sandbox's own"), serve("host service")
	env := egresstest.New(t, fmt.Sprintf(`agents:
  demo:
    egress:
      private: allow
      allow: ["localhost:%s"]
`, host.Port()), func(name string, qtype uint16, _ int) []netip.Addr {
		if name == "localhost" && qtype == 1 {
			return []netip.Addr{loopback}
		}
		return nil
	})
	rules := proto.ParseHostLoopback("localhost:" + host.Port())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go Forward(ln, NewForwarder(env.SocketPath("demo"), rules))
	proxy := ln.Addr().String()

	get := func(target string) (int, string) {
		resp, err := proxyClient(proxy, "").Get(target)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, target := range []string{"http://127.0.0.1:" + own.Port() + "/", "http://localhost:" + own.Port() + "/"} {
		if code, body := get(target); code != 200 || body != "sandbox's own" {
			t.Errorf("%s: %d %q", target, code, body)
		}
	}
	// CONNECT to the sandbox's own service, as an HTTPS client would.
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", own.Port(), own.Port())
	all, _ := io.ReadAll(bufio.NewReader(c))
	c.Close()
	if !strings.HasPrefix(string(all), "HTTP/1.1 200 Connection established") || !strings.HasSuffix(string(all), "sandbox's own") {
		t.Errorf("CONNECT to the sandbox's own loopback: %q", all)
	}
	if es := env.Egress(t); len(es) != 0 {
		t.Fatalf("the sandbox's own loopback went to the gateway: %+v", es[0])
	}

	if code, body := get("http://localhost:" + host.Port() + "/"); code != 200 || body != "host service" {
		t.Fatalf("allowlisted host loopback service: %d %q", code, body)
	}
	env.WaitReleased(t, "demo")
	if es := env.Egress(t); len(es) == 0 || es[0].Detail["host"] != "localhost" {
		t.Fatalf("the host's loopback service was not reached through the gateway: %+v", es)
	}

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	port := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	if code, body := get(fmt.Sprintf("http://127.0.0.1:%d/", port)); code != http.StatusBadGateway || !strings.Contains(body, "the sandbox's own loopback") {
		t.Errorf("nothing listening: %d %q", code, body)
	}
}
