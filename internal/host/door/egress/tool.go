package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// ToolName names egress calls in the audit log (`tool`); their `type` is egress.
const ToolName = "egress"

// AgentConfig is one agent's egress configuration, as the gateway runs it.
type AgentConfig struct {
	Policy         netrule.Policy
	MaxConnections int    // concurrent tunnels; the handler refuses more
	Limits         Limits // per tunnel
}

// Args are an egress call's arguments: what the sandbox asked to reach.
type Args struct {
	Target string `json:"target"` // host:port as the client sent it
}

// Tool is the gateway tool behind every egress call (Snapshot.ByKind[egress]).
// Prepare normalises the target and, for a target on the allowlist only,
// resolves it once, so the decision — and its audit entry — covers the
// addresses the connection will use: a refused answer (empty, metadata,
// private, mixed) is a denial on the record, never an allowed call that
// later fails. Run dials exactly those addresses and tunnels.
type Tool struct {
	agents map[string]*agentGuard
}

type agentGuard struct {
	cfg   AgentConfig
	guard *Guard
}

// NewTool builds the egress tool for the agents that have egress; others'
// calls are denied by policy and never resolved.
func NewTool(agents map[string]AgentConfig, o Options) *Tool {
	t := &Tool{agents: make(map[string]*agentGuard, len(agents))}
	for name, c := range agents {
		t.agents[name] = &agentGuard{cfg: c, guard: NewGuard(c.Policy, o)}
	}
	return t
}

func (t *Tool) Name() string       { return ToolName }
func (t *Tool) Kind() gateway.Kind { return gateway.KindEgress }

// HoldsOpen implements gateway.Standing: a tunnel is a way out while it
// lasts, decided again when the agent's session labels change.
func (t *Tool) HoldsOpen() bool { return true }

// MaxConnections is the agent's tunnel limit; false when it has no egress.
func (t *Tool) MaxConnections(agent string) (int, bool) {
	a, ok := t.agents[agent]
	if !ok {
		return 0, false
	}
	return a.cfg.MaxConnections, true
}

// Prepare parses the target into call.Host/Port and, when the agent's
// allowlist admits it, resolves it once into call.Egress. A
// target off the list is never looked up: DNS queries would otherwise be a
// channel out of the sandbox for names policy refuses.
func (t *Tool) Prepare(call *gateway.Call, _ gateway.AgentInfo) error {
	var a Args
	if err := json.Unmarshal(call.Args, &a); err != nil {
		return fmt.Errorf("egress: arguments: %w", err)
	}
	tg, err := netrule.ParseTarget(a.Target)
	if err != nil {
		return err
	}
	call.Host, call.Port = tg.Host, int(tg.Port)
	d := maps.Clone(call.Detail)
	if d == nil {
		d = map[string]any{}
	}
	d["host"], d["port"] = tg.Host, tg.Port
	if ag, ok := t.agents[call.Agent]; ok && ag.cfg.Policy.Match(tg).Allow {
		at := &Attempt{Host: tg.Host, Port: tg.Port}
		// The refusal a failed lookup returns is policy's to make, from the
		// recorded resolveError: Decide sees it, and so does replay.
		_ = ag.guard.Resolve(context.Background(), tg, at)
		maps.Copy(d, at.Detail())
		// The facts policy reads are typed; the gateway records them.
		delete(d, "resolved")
		delete(d, "resolveError")
		call.Egress = &gateway.EgressFacts{Resolved: at.Resolved, ResolveError: at.ResolveErr}
	}
	call.Detail = d
	return nil
}

// Downstream is the sandbox side of one egress call. The entry point puts it
// in the call's context (WithDownstream); Run accepts it once the upstream
// connection is up and tunnels the two.
type Downstream interface {
	// Accept tells the client the tunnel is open and returns its connection.
	Accept() (net.Conn, error)
}

type downstreamKey struct{}

// WithDownstream hands the client side of an egress call to the tool's Run.
func WithDownstream(ctx context.Context, d Downstream) context.Context {
	return context.WithValue(ctx, downstreamKey{}, d)
}

// ErrNoDownstream means an egress call ran without a client to tunnel for.
var ErrNoDownstream = errors.New("egress: no client connection to tunnel")

// Run dials the addresses Prepare pinned (vetting them again: the guard
// stands on its own), accepts the client and tunnels until either side
// ends or a limit is reached. The result entry's detail gets the addresses
// dialled, the bytes each way and the tunnel's duration.
func (t *Tool) Run(ctx context.Context, call *gateway.Call, _ *gateway.RunEnv) (*gateway.Result, error) {
	down, _ := ctx.Value(downstreamKey{}).(Downstream)
	ag, ok := t.agents[call.Agent]
	if down == nil || !ok {
		return nil, ErrNoDownstream
	}
	if call.Egress == nil {
		return nil, errors.New("egress: the call holds no resolved answer")
	}
	at := &Attempt{Host: call.Host, Port: uint16(call.Port), Resolved: call.Egress.Resolved, Decision: gateway.Decision{Allow: true}}
	d := maps.Clone(call.Detail) // the decision entry may still hold the old map
	defer func() { call.Detail = d }()

	upstream, err := ag.guard.DialResolved(ctx, at)
	maps.Copy(d, at.Detail())
	if err != nil {
		return nil, err
	}
	client, err := down.Accept()
	if err != nil {
		upstream.Close()
		return nil, fmt.Errorf("egress: accepting the client: %w", err)
	}
	start := time.Now()
	st, err := Tunnel(ctx, client, upstream, ag.cfg.Limits)
	d["bytesUp"], d["bytesDown"] = st.Up, st.Down
	d["tunnelMs"] = float64(time.Since(start).Microseconds()) / 1000
	res := &gateway.Result{}
	if err != nil {
		// The client already has its tunnel; how it ended is for the record.
		res.Error = err.Error()
	}
	return res, nil
}
