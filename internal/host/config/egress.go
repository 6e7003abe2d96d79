package config

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/host/netrule"
)

// Built-in egress defaults for an agent that has an egress section.
const (
	DefaultEgressConnections = 64
	DefaultEgressIdle        = 60 * time.Second
	DefaultEgressBytes       = 1 << 30
)

// ProxyVars are the variables through which a proxy would be configured for
// the gateway's own outbound traffic (Go, curl and most tools read them).
var ProxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}

// lookupEnv is the gateway's environment; tests replace it.
var lookupEnv = os.LookupEnv

// egress checks one egress section (an agent's or the defaults') as written.
func (d *decoder) egress(path string, e *Egress) {
	if e == nil {
		return
	}
	for i, s := range e.Allow {
		if _, err := netrule.ParseRule(s); err != nil {
			p := fmt.Sprintf("%s.allow[%d]", path, i)
			d.errorf(d.at(p), p, "%v", err)
		}
	}
	if e.Private != "" && e.Private != "allow" && e.Private != "deny" {
		d.errorf(d.at(path+".private"), path+".private", "%q is neither allow nor deny", e.Private)
	}
	d.positive(path+".maxConnections", int64(e.MaxConnections))
	d.positive(path+".idleTimeout", int64(e.IdleTimeout))
	d.positive(path+".maxBytes", e.MaxBytes)
}

// gatewayEgress checks the guard's own settings, and refuses a proxy in the
// gateway's environment when any agent has egress: the guard resolves each
// name once and dials the vetted addresses itself, so traffic the operator
// meant to go through that proxy would silently bypass it — and a proxy
// that resolved again would undo the pinning.
func (d *decoder) gatewayEgress(c *Config) {
	for i, p := range c.Gateway.Egress.NAT64 {
		if _, err := NAT64Prefix(p); err != nil {
			path := fmt.Sprintf("gateway.egress.nat64[%d]", i)
			d.errorf(d.at(path), path, "%v", err)
		}
	}
	if r := c.Gateway.Egress.Resolver; r != "" {
		if _, err := netip.ParseAddrPort(r); err != nil {
			d.errorf(d.at("gateway.egress.resolver"), "gateway.egress.resolver", "%q is not ip:port (e.g. 127.0.0.1:53); a resolver named by host would itself need resolving", r)
		}
	}
	var with []string
	for _, name := range sortedKeys(c.Agents) {
		if c.Agents[name].Egress != nil {
			with = append(with, name)
		}
	}
	if len(with) == 0 {
		return
	}
	var set []string
	for _, v := range ProxyVars {
		if val, ok := lookupEnv(v); ok && val != "" {
			set = append(set, v+"="+val)
		}
	}
	if len(set) > 0 {
		d.errorf(d.at("gateway.egress"), "gateway.egress",
			"the gateway's environment sets a proxy (%s) but agents %s have egress: egress is pinned (resolved once, dialled directly) and cannot go through an upstream proxy, so that traffic would bypass it; unset %s for the gateway",
			strings.Join(set, ", "), strings.Join(with, ", "), strings.Join(ProxyVars, "/"))
	}
}

// mergeEgress applies the defaults' egress section: an agent without one
// inherits it whole; one with its own takes the unset fields.
func mergeEgress(a, def *Agent) {
	if def.Egress == nil {
		return
	}
	if a.Egress == nil {
		e := *def.Egress
		e.Allow = slices.Clone(def.Egress.Allow)
		a.Egress = &e
		return
	}
	e, de := a.Egress, def.Egress
	if e.Allow == nil {
		e.Allow = slices.Clone(de.Allow)
	}
	e.Private = or(e.Private, de.Private)
	e.MaxConnections = or(e.MaxConnections, de.MaxConnections)
	e.IdleTimeout = or(e.IdleTimeout, de.IdleTimeout)
	e.MaxBytes = or(e.MaxBytes, de.MaxBytes)
}

func builtinEgress(e *Egress) {
	if e == nil {
		return
	}
	e.Private = or(e.Private, "deny")
	e.MaxConnections = or(e.MaxConnections, DefaultEgressConnections)
	e.IdleTimeout = or(e.IdleTimeout, DefaultEgressIdle)
	e.MaxBytes = or(e.MaxBytes, DefaultEgressBytes)
}

// Policy is the section's allowlist and private switch for the guard.
// Load has validated the rules; a config built by hand may hold bad ones,
// which are dropped (allowing less, never more).
func (e *Egress) Policy() netrule.Policy {
	var p netrule.Policy
	for _, s := range e.Allow {
		if r, err := netrule.ParseRule(s); err == nil {
			p.Allow = append(p.Allow, r)
		}
	}
	p.AllowPrivate = e.Private == "allow"
	return p
}

// NAT64Prefix parses an operator NAT64 prefix: IPv6, an RFC 6052 length.
func NAT64Prefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return p, fmt.Errorf("%q is not a prefix (e.g. 2001:db8:64::/96)", s)
	case !p.Addr().Is6() || p.Addr().Is4In6():
		return p, fmt.Errorf("%q is not an IPv6 prefix", s)
	case !slices.Contains([]int{32, 40, 48, 56, 64, 96}, p.Bits()):
		return p, fmt.Errorf("%q: a NAT64 prefix is /32, /40, /48, /56, /64 or /96 (RFC 6052)", s)
	}
	return p.Masked(), nil
}
