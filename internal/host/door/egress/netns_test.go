package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/door/egress/egresstest"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// echoEnv makes the test binary an echo server on the address it names: the
// "outside" host, run inside a network namespace the test creates.
const echoEnv = "TOOLGATE_TEST_NETNS_ECHO"

func TestMain(m *testing.M) {
	if addr := os.Getenv(echoEnv); addr != "" {
		os.Exit(serveEcho(addr))
	}
	os.Exit(m.Run())
}

// serveEcho echoes on addr, says "ready" once listening, and ends when
// its stdin closes (the test is over).
func serveEcho(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ready")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// netns creates a network namespace joined to this one by a veth pair and
// returns the host's and the namespace's addresses. It needs root; without
// it the test is skipped, unless TOOLGATE_REQUIRE_DOCKER=1 (CI) demands it.
func netns(t *testing.T) (ns string, host, inside netip.Addr) {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("TOOLGATE_REQUIRE_DOCKER") == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("no ip command: %v", err)
	}
	pid := os.Getpid()
	ns = fmt.Sprintf("tg%d", pid)
	hostIf, nsIf := fmt.Sprintf("tgh%d", pid), fmt.Sprintf("tgn%d", pid)
	// A private /30 per test process: 10.213.X.0.
	x := byte(pid%250 + 1)
	host, inside = netip.AddrFrom4([4]byte{10, 213, x, 1}), netip.AddrFrom4([4]byte{10, 213, x, 2})
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("netns", "add", ns); err != nil {
		skip("cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() { run("netns", "del", ns) }) // takes the veth pair with it
	for _, cmd := range [][]string{
		{"link", "add", hostIf, "type", "veth", "peer", "name", nsIf},
		{"link", "set", nsIf, "netns", ns},
		{"addr", "add", host.String() + "/30", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", ns, "addr", "add", inside.String() + "/30", "dev", nsIf},
		{"-n", ns, "link", "set", nsIf, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := run(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { run("link", "del", hostIf) })
	return ns, host, inside
}

// The "outside" is a host in another network namespace with a private
// address, reached by name through the test's DNS server: allowed with
// private: allow, refused without, and the addresses dialled are recorded.
func TestNetnsOutside(t *testing.T) {
	ns, _, inside := netns(t)
	outside := netip.AddrPortFrom(inside, 8080)
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0])
	cmd.Env = append(os.Environ(), echoEnv+"="+outside.String())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("echo server in %s: %q", ns, line)
	}

	env := egresstest.New(t, `agents:
  lab:
    egress: {allow: ["outside.test:8080"], private: allow}
  strict:
    egress: {allow: ["outside.test:8080"]}
`, answers(map[string][]netip.Addr{"outside.test": {inside}}))

	c := connect(t, env.SocketPath("lab"), "outside.test:8080", "")
	if c.status != http.StatusOK {
		t.Fatalf("lab: %d %+v", c.status, c.err)
	}
	echoes(t, c, "across the veth pair")
	c.Close()
	env.WaitReleased(t, "lab")
	es := env.Egress(t)
	if res := es[len(es)-1]; res.Detail["remote"] != outside.String() || res.Detail["bytesDown"] != float64(20) {
		t.Errorf("result %+v", res)
	}

	s := connect(t, env.SocketPath("strict"), "outside.test:8080", "")
	if s.status != http.StatusForbidden || s.err.Rule != netrule.RulePrivate || !strings.Contains(s.err.Message, inside.String()) {
		t.Errorf("strict: %d %+v", s.status, s.err)
	}
}
