package guest

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/host/door/egress/egresstest"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// forwarder serves the proxy for agent on a loopback port and returns its address.
func forwarder(t testing.TB, socket string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go Forward(ln, NewForwarder(socket, nil))
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// proxyClient is an HTTP client using the forwarder as the exec's
// environment would: credentials naming the call.
func proxyClient(proxy, callID string) *http.Client {
	u := &url.URL{Scheme: "http", Host: proxy}
	if callID != "" {
		u.User = url.UserPassword("call-"+callID, "x")
	}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}}
}

type fixture struct {
	env   *egresstest.Env
	proxy string
	web   *url.URL // an HTTP server, reachable as web.test
	echo  uint16   // an echo server, reachable as echo.test
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s %s", r.Method, r.URL.RequestURI())
	}))
	t.Cleanup(web.Close)
	wu, _ := url.Parse(web.URL)
	f := &fixture{web: wu, echo: egresstest.Echo(t, "127.0.0.1")}
	f.env = egresstest.New(t, fmt.Sprintf(`agents:
  demo:
    egress:
      private: allow
      allow: ["web.test:%s", "echo.test:%d", "169.254.169.254:80", "closed.test:1"]
`, wu.Port(), f.echo), func(name string, qtype uint16, _ int) []netip.Addr {
		if name == "evil.test" || qtype != 1 {
			return nil
		}
		return []netip.Addr{loopback}
	})
	f.proxy = forwarder(t, f.env.SocketPath("demo"))
	return f
}

func (f *fixture) lastEgress(t *testing.T) *gateway.Entry {
	t.Helper()
	es := f.env.Egress(t)
	if len(es) == 0 {
		t.Fatal("no egress entries")
	}
	return es[len(es)-1]
}

func TestForwardHTTP(t *testing.T) {
	f := newFixture(t)
	resp, err := proxyClient(f.proxy, "execcall1").Get("http://web.test:" + f.web.Port() + "/simple/?q=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello GET /simple/?q=1" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	f.env.WaitReleased(t, "demo")
	e := f.lastEgress(t)
	if e.Phase != gateway.PhaseResult || e.Parent != "execcall1" || e.Detail["host"] != "web.test" || e.Detail["bytesDown"] == float64(0) {
		t.Errorf("entry %+v", e)
	}
}

func TestForwardConnect(t *testing.T) {
	f := newFixture(t)
	c, br := rawConnect(t, f.proxy, fmt.Sprintf("echo.test:%d", f.echo), "call-execcall2:x")
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	io.WriteString(c, "through the forwarder")
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "through the forwarder" {
		t.Fatalf("%q %v", got, err)
	}
	f.env.WaitReleased(t, "demo")
	if e := f.lastEgress(t); e.Parent != "execcall2" || e.Detail["bytesUp"] != float64(21) || e.Detail["bytesDown"] != float64(21) {
		t.Errorf("entry %+v", e)
	}

	// Not through an exec: attributed to the agent alone.
	c, br = rawConnect(t, f.proxy, fmt.Sprintf("echo.test:%d", f.echo), "")
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	c.Close()
	f.env.WaitReleased(t, "demo")
	if e := f.lastEgress(t); e.Parent != "" {
		t.Errorf("parent %q without credentials", e.Parent)
	}
}

func rawConnect(t *testing.T, proxy, target, cred string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if cred != "" {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(cred)) + "\r\n"
	}
	io.WriteString(c, req+"\r\n")
	return c, bufio.NewReader(c)
}

// Every refusal reaches the sandbox's client as a proxy error it can show:
// 403 with the rule for a denial, 400 for a bad target, 502 when the
// destination or the gateway cannot be reached.
func TestForwardErrors(t *testing.T) {
	f := newFixture(t)
	get := func(u string) (int, string) {
		resp, err := proxyClient(f.proxy, "").Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	connect := func(target string) (int, string) {
		_, br := rawConnect(t, f.proxy, target, "")
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name   string
		do     func() (int, string)
		status int
		msg    string
	}{
		{"denied host", func() (int, string) { return get("http://evil.test:" + f.web.Port() + "/") }, 403, "denied by egress.allowlist: evil.test:" + f.web.Port() + " is not on the agent's egress allowlist"},
		{"denied CONNECT", func() (int, string) { return connect("evil.test:443") }, 403, "denied by egress.allowlist"},
		{"metadata", func() (int, string) { return get("http://169.254.169.254/latest/meta-data/") }, 403, "denied by egress.metadata: 169.254.169.254 is a cloud metadata address"},
		{"metadata in hex", func() (int, string) { return connect("0xa9fea9fe:80") }, 403, "egress.metadata"},
		{"CONNECT without a port", func() (int, string) { return connect("echo.test") }, 400, "missing port"},
		{"dial fails", func() (int, string) { return connect("closed.test:1") }, 502, "connection refused"},
		{"origin-form request", func() (int, string) {
			resp, err := http.Get("http://" + f.proxy + "/x")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}, 400, "absolute-form"},
		{"garbage instead of HTTP", func() (int, string) {
			c, err := net.Dial("tcp", f.proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, ""
		}, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, msg := tt.do()
			if status != tt.status || !strings.Contains(msg, tt.msg) {
				t.Errorf("%d %q; want %d with %q", status, msg, tt.status, tt.msg)
			}
		})
	}

	t.Run("gateway unavailable", func(t *testing.T) {
		proxy := forwarder(t, t.TempDir()+"/none.sock")
		resp, err := proxyClient(proxy, "").Get("http://web.test/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || !strings.Contains(string(b), "gateway unavailable") {
			t.Errorf("%d %q", resp.StatusCode, b)
		}
	})
}

// A process opening 10,000 connections through the forwarder: every one is
// answered (tunnel or 429), the gateway never holds more than the limit,
// and nothing stays counted.
func TestForwardManyConnections(t *testing.T) {
	const attempts, workers = 10000, 64
	f := newFixture(t)
	target := fmt.Sprintf("echo.test:%d", f.echo)
	jobs := make(chan struct{}, attempts)
	for range attempts {
		jobs <- struct{}{}
	}
	close(jobs)
	var mu sync.Mutex
	count := map[int]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				c, err := net.Dial("tcp", f.proxy)
				if err != nil {
					t.Error(err)
					return
				}
				io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
				c.Close()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				count[resp.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if count[200]+count[429] != attempts {
		t.Fatalf("statuses %v", count)
	}
	f.env.WaitReleased(t, "demo")
	t.Logf("statuses %v", count)
}
