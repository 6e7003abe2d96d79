package systemtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/connlimit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv"
)

// holdEnv makes the test binary a connection holder (holdConns): it opens
// the connections, says "held N", and keeps them idle until stdin closes.
const holdEnv = "TOOLGATE_TEST_HOLD_CONNS"

func init() {
	spec := os.Getenv(holdEnv)
	if spec == "" {
		return
	}
	addr, n, _ := strings.Cut(spec, ",")
	count, _ := strconv.Atoi(n)
	var conns []net.Conn
	for range count {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Printf("dial after %d: %v\n", len(conns), err)
			os.Exit(1)
		}
		conns = append(conns, c)
	}
	fmt.Printf("held %d\n", len(conns))
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// holdConns opens n idle, unauthenticated connections to addr from another
// process (so they cost the daemon its descriptors, not the test's) and
// keeps them until the test ends.
func holdConns(t testing.TB, addr string, n int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+addr+","+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != fmt.Sprintf("held %d\n", n) {
		t.Fatalf("connection holder: %q", line)
	}
}

// withNofile runs the rest of the test under a soft descriptor limit of n,
// the common default the flood exhausted.
func withNofile(t testing.TB, n uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = min(n, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// startListening restarts e's daemon with gateway.listen on a free loopback
// port and the builtin echo allowed to every agent; it returns the address.
func (e *Env) startListening() string {
	e.T.Helper()
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.Daemon = nil
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.T.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, clientBin := testenv.Binaries(e.T)
	cfg := fmt.Sprintf("gateway:\n  clientBinary: %s\n  listen: %s\nplugins:\n  echo: {kind: builtin, builtin: toolgate-echo}\nagents:\n", clientBin, addr)
	for _, a := range e.Agents {
		cfg += fmt.Sprintf("  %s:\n    tools: [echo]\n", a)
	}
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		e.T.Fatal(err)
	}
	e.Start()
	return addr
}

// agentSocketCall is one plugin call on the agent's socket, as a launcher
// in the sandbox makes it.
func (e *Env) agentSocketCall(ctx context.Context, agent string) error {
	sock := filepath.Join(e.Home, "agents", agent, "sock", proto.SocketName)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://toolgate/v1/tools/echo/call", strings.NewReader(`{"argv":["hi"]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"exitCode":0`)) {
		err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return err
}

// TestIdleFloodOnTCPDoesNotStarveOtherDoors: more idle, unauthenticated
// connections on the TCP listener than the process has descriptors used to
// hang every door; the listener's cap keeps the agent sockets and the admin
// socket answering.
func TestIdleFloodOnTCPDoesNotStarveOtherDoors(t *testing.T) {
	e := New(t, "flood")
	withNofile(t, 1024)
	addr := e.startListening()
	holdConns(t, addr, 1100)
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := e.agentSocketCall(ctx, e.Agents[0])
		cancel()
		if err != nil {
			t.Fatalf("agent socket call %d under the flood: %v", i, err)
		}
	}
	if _, err := e.Admin.Agents(context.Background()); err != nil { // the status is the daemon's own Docker calls
		t.Fatalf("the daemon's own Docker calls under the flood: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := e.Admin.Call(ctx, e.Agents[0], "echo", map[string]any{"argv": []string{"hi"}}, nil, nil); err != nil {
		t.Fatalf("admin socket call under the flood: %v", err)
	}
}

// BenchmarkAgentCallUnderIdleFlood measures a plugin call on an agent socket
// with the TCP listener quiet and with 2,000 idle connections held on it,
// under the descriptor limit (1024). p99 is the goal figure.
func BenchmarkAgentCallUnderIdleFlood(b *testing.B) {
	e := New(b, "benchflood")
	withNofile(b, 1024)
	addr := e.startListening()
	for _, idle := range []int{0, 2000} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			if idle > 0 {
				holdConns(b, addr, idle)
			}
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := e.agentSocketCall(ctx, e.Agents[0])
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// TestHalfOpenFloodFromOneSource: 1,100 connections that never send a
// request, all from loopback, used to keep every door of the TCP listener
// closed. Loopback is one source however many addresses it uses, and a
// source at its limit makes room by closing its oldest connection that
// carries no request: the same source's next requests get the dashboard,
// the admin API, /metrics and /mcp. With every one of its connections in a
// request (live feeds), its next connection is refused on the record, and
// the admin socket answers throughout.
func TestHalfOpenFloodFromOneSource(t *testing.T) {
	e := New(t, "halfopen")
	withNofile(t, 1024)
	addr := e.startListening()
	holdConns(t, addr, 1100)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/metrics", "", http.StatusOK},
		{"GET", "/ui/", e.Token, http.StatusOK},
		{"GET", "/v1/agents", e.Token, http.StatusOK},
		{"POST", "/mcp", "", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Errorf("%s %s under the flood: %v", c.method, c.path, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s under the flood: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every connection of the source in a request: the next one is refused.
	// The source's limit is the daemon's plan for the descriptor limit it
	// started under.
	nofile, err := connlimit.Nofile()
	if err != nil {
		t.Fatal(err)
	}
	perSource := connlimit.Plan(nofile).PerSource
	for i := range perSource {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /ui/feed/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", e.Token)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("live feed %d of %d: %q %v", i+1, perSource, line, err)
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c); len(b) > 0 || isTimeout(err) {
		t.Fatalf("a connection over the source's limit was answered: %q %v", b, err)
	}
	// The refusal is recorded beside the accept loop, not in it.
	var refused []*gateway.Entry
	for deadline := time.Now().Add(5 * time.Second); len(refused) == 0 && time.Now().Before(deadline); {
		for _, en := range e.Entries(audit.Filter{Type: string(gateway.KindAdmin), Decision: "deny"}) {
			if en.Rule == connlimit.RuleSourceLimit {
				refused = append(refused, en)
			}
		}
		time.Sleep(20 * time.Millisecond) // polling the log for the entry
	}
	if len(refused) != 1 || refused[0].Detail["source"] != "local" || refused[0].Via != "tcp" {
		t.Fatalf("refusals on the record: %+v", refused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := e.Admin.Call(ctx, e.Agents[0], "echo", map[string]any{"argv": []string{"hi"}}, nil, nil); err != nil {
		t.Fatalf("admin socket call with the source at its limit: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
