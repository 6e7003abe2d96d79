// Package egresstest runs the host side of egress for tests: a real gateway
// with its audit writer and policy engine, the egress tool and the agent
// socket's egress route, resolving through a scripted DNS server.
package egresstest

import (
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/agentsock/sockettest"
	"github.com/toolgate/toolgate/internal/host/door/egress"
	"github.com/toolgate/toolgate/internal/host/door/egress/dnstest"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/policy"
	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// Env is a running gateway serving egress on its agents' sockets.
type Env struct {
	*sockettest.Env
	Config  *config.Config
	Handler *egress.Handler
	DNS     *dnstest.Server
}

// New loads configYAML (agents with egress sections), resolves through a
// DNS server answering with answer, and serves every agent's socket.
func New(t testing.TB, configYAML string, answer func(name string, qtype uint16, n int) []netip.Addr) *Env {
	t.Helper()
	cfg, err := config.Parse(t.TempDir(), "egress.yaml", []byte(configYAML))
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Config: cfg, DNS: dnstest.New(t, answer)}
	cfg.Gateway.Egress.Resolver = e.DNS.Addr()
	eng, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	agents := sockettest.Allowlist{}
	for name := range cfg.Agents {
		agents[name] = nil
	}
	e.Env = sockettest.New(t, agents)
	snap := *e.GW.Snapshot()
	snap.Decider = eng
	snap.ByKind = map[gateway.Kind]gateway.Tool{gateway.KindEgress: assemble.EgressTool(cfg)}
	e.GW.Swap(&snap)
	e.Handler = egress.NewHandler(e.GW)
	e.Server.Handle(egress.Pattern, e.Handler)
	e.Serve(t, slices.Sorted(maps.Keys(agents))...)
	return e
}

// Egress returns the audit entries of egress calls so far.
func (e *Env) Egress(t testing.TB) []*gateway.Entry {
	t.Helper()
	var out []*gateway.Entry
	for _, en := range e.Entries(t) {
		if en.Type == gateway.KindEgress {
			out = append(out, en)
		}
	}
	return out
}

// Echo listens on addr:0 and echoes every connection; it returns the port.
func Echo(t testing.TB, addr string) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	probe.Serve(t, ln, func(c net.Conn) { _, _ = io.Copy(c, c) })
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// WaitReleased waits until agent has no tunnel open: a client sees its
// tunnel close a moment before the result entry is written and the slot
// given back.
func (e *Env) WaitReleased(t testing.TB, agent string) {
	t.Helper()
	for i := 0; e.Handler.Open(agent) != 0; i++ {
		if i == 5000 {
			t.Fatalf("%d tunnels of %s still open", e.Handler.Open(agent), agent)
		}
		time.Sleep(time.Millisecond)
	}
}
