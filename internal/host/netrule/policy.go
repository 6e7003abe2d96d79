package netrule

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Rule names in decisions, as they appear in the audit entry's `rule`.
const (
	RuleAllowlist = "egress.allowlist" // no allow rule matched (or the list is empty)
	RuleResolve   = "egress.resolve"   // the name did not resolve
	RuleEmpty     = "egress.empty"     // the answer held no address
	RuleMetadata  = "egress.metadata"  // a cloud metadata address
	RulePrivate   = "egress.private"   // a non-global address, private not allowed
	RuleMixed     = "egress.mixed"     // global and non-global addresses in one answer
)

// Policy is one agent's egress policy.
type Policy struct {
	Allow        []Rule
	AllowPrivate bool // non-global destinations; metadata stays refused
}

// Match returns the decision of the allowlist alone: the first matching
// rule allows ("egress.allow[i]"); an empty list allows nothing.
func (p *Policy) Match(t Target) gateway.Decision {
	for i, r := range p.Allow {
		if r.Match(t) {
			return gateway.Decision{Allow: true, Rule: fmt.Sprintf("egress.allow[%d]", i), Reason: "allowed by " + r.String()}
		}
	}
	return gateway.Decision{Rule: RuleAllowlist, Reason: t.String() + " is not on the agent's egress allowlist"}
}

// Vet decides a resolved answer. It is pure: the gateway's policy pipeline
// and replay call it with recorded addresses. classify nil means Classify.
func (p *Policy) Vet(addrs []netip.Addr, classify func(netip.Addr) Class) gateway.Decision {
	if classify == nil {
		classify = Classify
	}
	if len(addrs) == 0 {
		return gateway.Decision{Rule: RuleEmpty, Reason: "the name resolved to no address"}
	}
	var global, private []string
	for _, a := range addrs {
		switch classify(a) {
		case Metadata:
			return gateway.Decision{Rule: RuleMetadata, Reason: a.String() + " is a cloud metadata address"}
		case Global:
			global = append(global, a.String())
		default:
			private = append(private, a.String())
		}
	}
	switch {
	case len(private) > 0 && len(global) > 0:
		return gateway.Decision{Rule: RuleMixed, Reason: fmt.Sprintf("answer mixes global (%s) and non-global (%s) addresses", strings.Join(global, ", "), strings.Join(private, ", "))}
	case len(private) > 0 && !p.AllowPrivate:
		return gateway.Decision{Rule: RulePrivate, Reason: fmt.Sprintf("non-global address %s and private destinations are not allowed", strings.Join(private, ", "))}
	}
	return gateway.Decision{Allow: true, Rule: "egress.addresses", Reason: "every address is permitted"}
}

// RecordedFacts reads an egress call's facts back from its decision
// entry's detail (replay); nil when the entry holds no answer (its target
// was never looked up).
func RecordedFacts(detail map[string]any) (*gateway.EgressFacts, error) {
	if _, ok := detail["resolved"]; !ok {
		return nil, nil
	}
	addrs, err := resolved(detail)
	if err != nil {
		return nil, err
	}
	e, _ := detail["resolveError"].(string)
	return &gateway.EgressFacts{Resolved: addrs, ResolveError: e}, nil
}

func resolved(detail map[string]any) ([]netip.Addr, error) {
	var ss []string
	switch v := detail["resolved"].(type) {
	case []string:
		ss = v
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, errors.New("egress: resolved addresses are not strings")
			}
			ss = append(ss, s)
		}
	case nil:
		return nil, errors.New("egress: the call holds no resolved answer")
	default:
		return nil, fmt.Errorf("egress: resolved addresses of type %T", v)
	}
	addrs := make([]netip.Addr, len(ss))
	for i, s := range ss {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("egress: resolved address: %w", err)
		}
		addrs[i] = a
	}
	return addrs, nil
}

// Decide is the egress part of policy for a prepared call: the allowlist,
// then the answer Prepare recorded (lookup failure, empty, metadata,
// private, mixed). It is pure, so replay against the audit log reaches the
// decision the gateway made. An allow carries the allowlist rule.
func (p *Policy) Decide(call *gateway.Call) gateway.Decision {
	if call.Port < 1 || call.Port > 65535 {
		return gateway.Decision{Rule: "args.invalid", Reason: "egress call without a valid port"}
	}
	tg, err := ParseTarget(net.JoinHostPort(call.Host, strconv.Itoa(call.Port)))
	if err != nil {
		return gateway.Decision{Rule: "args.invalid", Reason: err.Error()}
	}
	allow := p.Match(tg)
	if !allow.Allow {
		return allow
	}
	f := call.Egress
	switch {
	case f == nil:
		return gateway.Decision{Rule: RuleResolve, Reason: "egress: the call holds no resolved answer"}
	case f.ResolveError != "":
		return gateway.Decision{Rule: RuleResolve, Reason: fmt.Sprintf("resolving %s: %s", tg.Host, f.ResolveError)}
	}
	if d := p.Vet(f.Resolved, nil); !d.Allow {
		return d
	}
	return allow
}
