// Package egress is the host-side guard for a sandbox's outbound
// connections: it normalises the requested target, matches it against the
// agent's allowlist, resolves the name once, refuses non-global and
// cloud-metadata addresses in every encoding, and dials only the addresses
// it validated, so DNS rebinding cannot move a connection after the check.
// What it may reach is decided by internal/host/netrule; this package holds
// the host's side only: the guard, the tunnels, the egress tool and the
// socket route.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// Resolver looks a name up once. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options tune a Guard; the zero value is production-ready.
type Options struct {
	Resolver       Resolver      // nil: net.DefaultResolver
	ResolveTimeout time.Duration // default 5s
	DialTimeout    time.Duration // per address; default 5s
	// DialBudget bounds all the dial attempts of one connection together, so
	// an answer full of black-hole addresses cannot hold a connection slot
	// for minutes; default 3 × DialTimeout.
	DialBudget time.Duration
	// NAT64 lists the network's operator NAT64 prefixes, so the IPv4
	// address they carry is classified (the well-known prefix always is).
	NAT64 []netip.Prefix
	// Classify replaces address classification. Tests only: it lets a test
	// treat loopback as its "outside". Configuration never sets it, and a
	// metadata address stays refused whatever it returns.
	Classify func(netip.Addr) netrule.Class
}

// Guard dials targets for one agent under its policy.
type Guard struct {
	policy   netrule.Policy
	opts     Options
	classify func(netip.Addr) netrule.Class
	// connect dials one vetted address; tests replace it to stand in for a
	// network that never answers.
	connect func(ctx context.Context, network, address string, d *net.Dialer) (net.Conn, error)
}

// NewGuard returns a guard for one agent's policy.
func NewGuard(p netrule.Policy, o Options) *Guard {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.ResolveTimeout <= 0 {
		o.ResolveTimeout = 5 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.DialBudget <= 0 {
		o.DialBudget = 3 * o.DialTimeout
	}
	base := netrule.Classifier{NAT64: o.NAT64}.Classify
	g := &Guard{policy: p, opts: o, classify: base}
	if o.Classify != nil {
		g.classify = func(a netip.Addr) netrule.Class {
			if base(a) == netrule.Metadata {
				return netrule.Metadata
			}
			return o.Classify(a)
		}
	}
	return g
}

// Attempt is what the audit entry of one connection needs.
type Attempt struct {
	Host       string
	Port       uint16
	Resolved   []netip.Addr     // the answer, as validated
	Dialled    []netip.AddrPort // every address tried, in order
	Remote     netip.AddrPort   // the one connected to; zero when none
	Decision   gateway.Decision
	Resolve    time.Duration
	Dial       time.Duration
	ResolveErr string // why the lookup failed
	Err        string // why dialling failed after an allow
}

// Detail renders the attempt for gateway.Call.Detail / Entry.Detail.
func (a *Attempt) Detail() map[string]any {
	str := func(xs []netip.Addr) []string {
		out := make([]string, len(xs))
		for i, x := range xs {
			out[i] = x.String()
		}
		return out
	}
	dialled := make([]string, len(a.Dialled))
	for i, d := range a.Dialled {
		dialled[i] = d.String()
	}
	m := map[string]any{
		"host":      a.Host,
		"port":      a.Port,
		"resolved":  str(a.Resolved),
		"resolveMs": float64(a.Resolve.Microseconds()) / 1000,
	}
	if len(a.Dialled) > 0 { // nothing dialled yet: a decision, not a connection
		m["dialled"] = dialled
		m["dialMs"] = float64(a.Dial.Microseconds()) / 1000
	}
	if a.Remote.IsValid() {
		m["remote"] = a.Remote.String()
	}
	if a.ResolveErr != "" {
		m["resolveError"] = a.ResolveErr
	}
	if a.Err != "" {
		m["dialError"] = a.Err
	}
	return m
}

// errNoResolve makes any resolution inside the dialer fail: the guard hands
// it IP literals only, and this proves it cannot silently resolve again.
var errNoResolve = errors.New("egress: the pinned dialer never resolves")

var noResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errNoResolve
}}

// Dial matches the allowlist, resolves once, vets the answer and dials only
// the vetted addresses in order. A refusal is a *gateway.DeniedError; the
// Attempt is returned in every case for the audit entry.
func (g *Guard) Dial(ctx context.Context, t netrule.Target) (net.Conn, *Attempt, error) {
	at := &Attempt{Host: t.Host, Port: t.Port}
	at.Decision = g.policy.Match(t)
	if !at.Decision.Allow {
		return nil, at, &gateway.DeniedError{Decision: at.Decision}
	}
	if err := g.Resolve(ctx, t, at); err != nil {
		return nil, at, err
	}
	conn, err := g.DialResolved(ctx, at)
	return conn, at, err
}

// Resolve looks t up once and records the answer in at.Resolved; an IP
// literal is its own answer. A failed lookup is a refusal (netrule.RuleResolve).
// It is the first half of Dial, for callers that decide between the two.
func (g *Guard) Resolve(ctx context.Context, t netrule.Target, at *Attempt) error {
	if t.IsIP() {
		at.Resolved = []netip.Addr{t.Addr}
		return nil
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, g.opts.ResolveTimeout)
	addrs, err := g.opts.Resolver.LookupNetIP(rctx, "ip", lookupName(t.Host))
	cancel()
	at.Resolve = time.Since(start)
	if err != nil {
		at.ResolveErr = err.Error()
		at.Decision = gateway.Decision{Rule: netrule.RuleResolve, Reason: fmt.Sprintf("resolving %s: %v", t.Host, err)}
		return &gateway.DeniedError{Decision: at.Decision}
	}
	// A records come back IPv4-mapped; dial and record them as IPv4.
	for _, a := range addrs {
		at.Resolved = append(at.Resolved, a.Unmap())
	}
	return nil
}

// lookupName roots a dotted name, so the host's resolv.conf search domains
// never turn one that does not exist into a name under them that no rule
// allowed. A single-label name is left relative: the operator allowlisted
// a local name (/etc/hosts, the search domain), which only resolves so.
func lookupName(host string) string {
	if strings.Contains(host, ".") {
		return host + "."
	}
	return host
}

// DialResolved vets at.Resolved and dials only those addresses, in order,
// never resolving again: the second half of Dial. at.Decision is the
// allowlist's allow; a refused answer replaces it with the refusal.
func (g *Guard) DialResolved(ctx context.Context, at *Attempt) (net.Conn, error) {
	if d := g.policy.Vet(at.Resolved, g.classify); !d.Allow {
		at.Decision = d
		return nil, &gateway.DeniedError{Decision: d}
	}
	start := time.Now()
	defer func() { at.Dial = time.Since(start) }()
	ctx, cancel := context.WithTimeout(ctx, g.opts.DialBudget)
	defer cancel()
	var errs []error
	for _, a := range at.Resolved {
		ap := netip.AddrPortFrom(a, at.Port)
		at.Dialled = append(at.Dialled, ap)
		conn, err := g.dialPinned(ctx, ap)
		if err == nil {
			at.Remote = ap
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	err := errors.Join(errs...)
	at.Err = err.Error()
	return nil, fmt.Errorf("egress: dialling %s: %w", net.JoinHostPort(at.Host, strconv.Itoa(int(at.Port))), err)
}

func (g *Guard) dialPinned(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{
		Timeout:  g.opts.DialTimeout,
		Resolver: noResolver,
		// Belt and braces: the socket may connect only to the vetted address.
		Control: func(_, address string, _ syscall.RawConn) error {
			got, err := netip.ParseAddrPort(address)
			if err != nil || got.Addr().Unmap() != ap.Addr() || got.Port() != ap.Port() {
				return fmt.Errorf("egress: refusing to connect to %s, vetted %s", address, ap)
			}
			return nil
		},
	}
	network := "tcp4"
	if ap.Addr().Is6() {
		network = "tcp6"
	}
	if g.connect != nil {
		ctx, cancel := context.WithTimeout(ctx, d.Timeout)
		defer cancel()
		return g.connect(ctx, network, ap.String(), &d)
	}
	return d.DialContext(ctx, network, ap.String())
}
