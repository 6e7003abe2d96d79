package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Snapshot is the configuration the pipeline runs on. A reload swaps the
// whole snapshot at once; calls in flight keep the one they started with.
type Snapshot struct {
	Agents map[string]AgentInfo
	Tools  map[string]Tool // by name: core tools and plugin tools
	// ByKind serves every call of a kind whose tool names are not the
	// gateway's own: a hook call carries Claude Code's tool name (Bash,
	// mcp__srv__tool …) and is prepared by the one hook tool. It takes
	// precedence over Tools for calls whose entry point set that Kind.
	ByKind  map[Kind]Tool
	Decider Decider
}

// DeniedError is returned for a call that policy (or identification) refused.
type DeniedError struct {
	ID       string // the audit id of the refused call
	Decision Decision
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("denied by %s: %s", e.Decision.Rule, e.Decision.Reason)
}

// ErrAuditUnavailable means the decision could not be made durable, so the
// call was refused without running.
var ErrAuditUnavailable = errors.New("audit log unavailable: call refused")

// ErrSandboxUnavailable is wrapped by a Sandboxes' error when the agent's
// sandbox could not be brought up (or is still coming up past the wait):
// an allowed call that did not run for that reason.
var ErrSandboxUnavailable = errors.New("sandbox unavailable")

// Options are the gateway's collaborators.
type Options struct {
	Audit     AuditSink
	Sandboxes Sandboxes
	// BoundArgs shrinks arguments for the audit log (bodies to sizes, long
	// strings cut, secrets redacted). Nil keeps them as sent.
	BoundArgs func(json.RawMessage) json.RawMessage
	Logger    *slog.Logger
	// Approvals holds calls a rule sends to a person; nil denies them.
	Approvals Approver
	// Limiter applies rate limits and budgets to allowed calls; nil: none.
	Limiter Limiter
	// Sessions keeps the labels each session's calls gave it, which
	// policy reads; nil: calls are decided alone.
	Sessions Sessions
	// Observer is told how each call went (metrics, traces: several through
	// Observers); nil: no one.
	Observer Observer
	// AsyncResults lets a call's caller have its outcome without waiting
	// for the result entry's fsync, when the sink is an AuditQueue. The
	// decision entry is always durable before the call runs; the result is
	// ordered behind it and made durable with the next decision, or after
	// the sink's short hold when none comes. It saves one fsync per call on
	// the caller's path.
	AsyncResults bool
	// RefusalBurst and RefusalEvery bound the refusals one source puts on
	// record one by one: RefusalBurst per RefusalEvery, the rest counted
	// into one coalesced entry per interval (see Refuse). Zero takes
	// DefaultRefusalBurst and DefaultRefusalEvery.
	RefusalBurst int
	RefusalEvery time.Duration
}

// Gateway is the one pipeline.
type Gateway struct {
	opts     Options
	state    atomic.Pointer[Snapshot]
	refusals *refusals
	links    links    // the agent of each recent call, for parent hints
	standing standing // calls holding a way out open (standing.go)
	stats    sync.Map // agent name → *AgentStats

	mu       sync.Mutex // guards inflight and idle
	inflight int
	idle     chan struct{} // closed when inflight drops to 0; nil while nobody waits
}

// AgentStats counts an agent's calls since the gateway started.
type AgentStats struct {
	Calls   atomic.Uint64
	Denials atomic.Uint64
}

// New returns a gateway running on the given snapshot.
func New(opts Options, snap *Snapshot) *Gateway {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &Gateway{opts: opts, refusals: newRefusals(opts.RefusalBurst, opts.RefusalEvery)}
	g.state.Store(snap)
	return g
}

// Swap installs a new snapshot (config reload) and returns the old one.
func (g *Gateway) Swap(snap *Snapshot) *Snapshot { return g.state.Swap(snap) }

// Snapshot returns the configuration currently in force.
func (g *Gateway) Snapshot() *Snapshot { return g.state.Load() }

// Stats returns the counters of one agent.
func (g *Gateway) Stats(agent string) *AgentStats {
	s, _ := g.stats.LoadOrStore(agent, &AgentStats{})
	return s.(*AgentStats)
}

// Handle runs one call through identify → decide → execute → record. Every
// entry point calls it. The call's Agent must already be set from the
// transport's identity.
func (g *Gateway) Handle(ctx context.Context, call *Call, io *Streams) (*Result, error) {
	g.begin()
	defer g.end()
	snap := g.state.Load()
	start := time.Now()
	call.ID = NewID()
	g.links.unlink(call.Agent, &call.Parent, &call.Detail)
	g.links.remember(call.ID, call.Agent)
	if s, ok := g.opts.Observer.(CallStarter); ok {
		s.StartCall(CallStats{ID: call.ID, Agent: call.Agent, Kind: call.Kind, Tool: call.Tool, Parent: call.Parent,
			Session: call.Session, Via: call.Via, Start: start, Detail: call.Detail})
	}
	tool, dec := g.decide(ctx, snap, call)
	if dec.Ask {
		var err error
		if dec, _, io, err = g.ask(ctx, snap, call, tool, dec, io); err != nil {
			return nil, err
		}
	}
	settle, dec, io, err := g.charge(ctx, snap, call, tool, dec, io)
	if err != nil {
		return nil, err
	}
	ran := false
	if settle != nil {
		defer func() { settle(ran) }() // after the call ran; at once for one refused below
	}
	if dec.Allow && g.opts.Limiter != nil {
		done, over := g.opts.Limiter.Admit(call)
		if over != nil {
			dec = *over
		} else {
			defer done()
		}
	}
	decided := time.Now()
	entry := g.entry(call, tool, dec)
	if err := g.opts.Audit.Append(entry); err != nil {
		g.opts.Logger.Error("audit append failed; call refused", "id", call.ID, "agent", call.Agent, "tool", call.Tool, "err", err)
		return nil, fmt.Errorf("%w: %v", ErrAuditUnavailable, err)
	}
	recorded := time.Now()
	if dec.Allow && g.opts.Sessions != nil && g.opts.Sessions.Give(call, dec) {
		g.recheck(call, dec.Labels)
	}
	stats := g.Stats(call.Agent)
	stats.Calls.Add(1)
	cs := CallStats{ID: call.ID, Agent: call.Agent, Kind: call.Kind, Parent: call.Parent, Session: call.Session, Via: call.Via,
		Decision: dec.Verdict(), Start: start, Decide: decided.Sub(start), Record: recorded.Sub(decided), Detail: call.Detail}
	if tool != nil {
		cs.Tool = call.Tool
	}
	if !dec.Allow {
		stats.Denials.Add(1)
		g.observe(cs)
		return nil, &DeniedError{ID: call.ID, Decision: dec}
	}

	env := &RunEnv{Agent: snap.Agents[call.Agent], IO: io}
	var res *Result
	if tool.Kind() == KindCore && g.opts.Sandboxes != nil {
		env.Sandbox, err = g.opts.Sandboxes.Sandbox(ctx, call.Agent)
	}
	if err == nil {
		runCtx, release := g.hold(ctx, snap, call, tool)
		res, err = tool.Run(runCtx, call, env)
		release()
		ran = true
	}

	result := g.entry(call, tool, dec)
	result.Phase = PhaseResult
	result.Args = nil // recorded with the decision
	ms := float64(time.Since(start).Microseconds()) / 1000
	result.DurationMs = &ms
	if res != nil {
		result.ExitCode = res.ExitCode
		result.Error = res.Error
	}
	if err != nil {
		result.Error = err.Error()
	}
	result.Error = g.boundText(result.Error)
	cs.Execute, cs.Failed, cs.Detail = time.Since(recorded), result.Error != "", call.Detail
	g.observe(cs)
	if q, ok := g.opts.Audit.(AuditQueue); ok && g.opts.AsyncResults {
		q.Enqueue(result)
	} else if aerr := g.opts.Audit.Append(result); aerr != nil {
		// The call already ran and its decision is on record; the caller still
		// gets the outcome, and the operator a loud log line.
		g.opts.Logger.Error("audit append of result failed", "id", call.ID, "err", aerr)
	}
	return res, err
}

// ask records that a call waits for a person, waits for the answer and
// returns the final decision, with who answered and when in its detail.
// Without an approver, or when the ask cannot be recorded, nobody can
// answer: the call is denied (or refused).
//
// A call with input has it read whole first (readInput): a person approves
// every byte the call will use, so the tool gets the very bytes they were
// shown (in the streams returned); a tool that holds its input says what it
// is (InputHolder). The entries record its size and SHA-256. An input that
// cannot be held for them denies the call.
func (g *Gateway) ask(ctx context.Context, snap *Snapshot, call *Call, tool Tool, dec Decision, io *Streams) (Decision, Approval, *Streams, error) {
	final := Decision{Rule: dec.Rule, Shadow: dec.Shadow, Labels: dec.Labels, Policy: dec.Policy}
	if g.opts.Approvals == nil {
		final.Reason = dec.Reason + " (asks a person, and this gateway has no one to ask)"
		return final, Approval{}, io, nil
	}
	call.Detail = maps.Clone(call.Detail)
	if call.Detail == nil {
		call.Detail = map[string]any{}
	}
	h, holds := tool.(InputHolder)
	switch {
	case io != nil && io.Stdin != nil:
		in, err := readInput(ctx, io.Stdin)
		if err != nil {
			final.Reason = dec.Reason + " (" + err.Error() + ")"
			return final, Approval{}, io, nil
		}
		call.Input = in
		held := *io
		held.Stdin = bytes.NewReader(in)
		io = &held
	case holds:
		call.Input = h.HeldInput(call)
	}
	if call.Input != nil {
		sum := sha256.Sum256(call.Input)
		call.Detail["input"] = map[string]any{"bytes": len(call.Input), "sha256": hex.EncodeToString(sum[:])}
	}
	pending := g.entry(call, tool, dec)
	pending.Phase = PhaseAsk
	if err := g.opts.Audit.Append(pending); err != nil {
		g.opts.Logger.Error("audit append failed; call refused", "id", call.ID, "agent", call.Agent, "tool", call.Tool, "err", err)
		return final, Approval{}, io, fmt.Errorf("%w: %v", ErrAuditUnavailable, err)
	}
	a := g.opts.Approvals.Await(ctx, call, dec, snap.Agents[call.Agent].AskTimeout)
	final.Allow = a.Allow
	final.Reason = dec.Reason + " — " + a.Reason
	approved := map[string]any{"outcome": a.Outcome, "by": a.By, "at": a.At.UTC(),
		"waitedMs": float64(a.Waited.Microseconds()) / 1000}
	if a.Raise != "" {
		approved["raise"] = a.Raise
	}
	call.Detail["approval"] = approved
	return final, a, io, nil
}

// charge counts an allowed call against its task's budget. At a cap it
// asks a person (recorded like any ask), who may raise the cap; a call
// they approve is charged past it.
func (g *Gateway) charge(ctx context.Context, snap *Snapshot, call *Call, tool Tool, dec Decision, io *Streams) (func(bool), Decision, *Streams, error) {
	if !dec.Allow || g.opts.Sessions == nil {
		return nil, dec, io, nil
	}
	settle, over := g.opts.Sessions.Charge(call, false)
	if over == nil {
		return settle, dec, io, nil
	}
	over.Shadow, over.Labels, over.Policy = dec.Shadow, dec.Labels, dec.Policy
	final, a, io, err := g.ask(ctx, snap, call, tool, *over, io)
	if err != nil || !final.Allow {
		return nil, final, io, err
	}
	if a.Raise != "" {
		if err := g.opts.Sessions.Raise(call, a.Raise); err != nil {
			g.opts.Logger.Warn("a raised budget was not applied", "id", call.ID, "raise", a.Raise, "err", err)
		}
	}
	settle, _ = g.opts.Sessions.Charge(call, true)
	return settle, final, io, nil
}

// MaxAskInput bounds the input of a call that asks a person: it is held
// in memory, shown and bound whole before they answer.
const MaxAskInput = 1 << 20

// askInputWait bounds how long the input of a call that asks a person may
// take to end: the call sends it whole before anyone is asked. A variable
// for the tests.
var askInputWait = 10 * time.Second

// readInput reads a call's whole input for a person to see. A read still
// blocked when it gives up ends when the door closes the input, as every
// door does once Handle returns.
func readInput(ctx context.Context, r io.Reader) ([]byte, error) {
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, MaxAskInput+1))
		done <- read{b, err}
	}()
	wait := time.NewTimer(askInputWait)
	defer wait.Stop()
	select {
	case rd := <-done:
		switch {
		case rd.err != nil:
			return nil, fmt.Errorf("its input could not be read: %v", rd.err)
		case len(rd.b) > MaxAskInput:
			return nil, fmt.Errorf("its input is over %d bytes, more than a person is shown to approve", MaxAskInput)
		case rd.b == nil:
			rd.b = []byte{}
		}
		return rd.b, nil
	case <-wait.C:
		return nil, fmt.Errorf("its input did not end within %s; a call that asks a person sends its whole input first", askInputWait)
	case <-ctx.Done():
		return nil, errors.New("the caller went away while its input was read")
	}
}

func (g *Gateway) observe(cs CallStats) {
	if g.opts.Observer != nil {
		g.opts.Observer.ObserveCall(cs)
	}
}

func (g *Gateway) begin() {
	g.mu.Lock()
	g.inflight++
	g.mu.Unlock()
}

func (g *Gateway) end() {
	g.mu.Lock()
	if g.inflight--; g.inflight == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
	g.mu.Unlock()
}

// Wait returns once no call is in Handle (every result entry handed to the
// audit sink), or with ctx's error. A shutdown calls it after its listeners
// stop and before it closes the audit log, so no running call loses its
// result entry; it writes the refusal counts still open first.
func (g *Gateway) Wait(ctx context.Context) error {
	g.FlushRefusals()
	g.mu.Lock()
	if g.inflight == 0 {
		g.mu.Unlock()
		return nil
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *Gateway) decide(ctx context.Context, snap *Snapshot, call *Call) (Tool, Decision) {
	tool, refused := Prepare(snap, call)
	if refused != nil {
		return tool, *refused
	}
	if g.opts.Sessions != nil {
		call.SessionFacts = g.opts.Sessions.Facts(call)
	}
	dec := snap.Decider.Decide(call)
	// Only a call policy lets through is admitted: a denied one must not
	// make the tool reach out (start an upstream server) at all.
	if a, ok := tool.(Admitter); ok && (dec.Allow || dec.Ask) {
		if r := a.Admit(ctx, call); r != nil {
			return tool, Decision{Rule: r.Rule, Reason: r.Reason, Shadow: dec.Shadow}
		}
	}
	return tool, dec
}

// Prepare identifies the agent and tool of a call and lets the tool validate
// its arguments and fill the policy facts. A non-nil Decision means the call
// is refused before policy is asked (unknown agent or tool, bad arguments).
func Prepare(snap *Snapshot, call *Call) (Tool, *Decision) {
	agent, ok := snap.Agents[call.Agent]
	if !ok {
		return nil, &Decision{Rule: "agent.unknown", Reason: fmt.Sprintf("unknown agent %q", call.Agent)}
	}
	if len(call.Args) > 0 && !json.Valid(call.Args) {
		return nil, &Decision{Rule: "args.invalid", Reason: "arguments are not valid JSON"}
	}
	tool, ok := snap.ByKind[call.Kind]
	if !ok {
		tool, ok = snap.Tools[call.Tool]
	}
	if !ok {
		return nil, &Decision{Rule: "tool.unknown", Reason: fmt.Sprintf("unknown tool %q", call.Tool)}
	}
	if call.Kind == "" {
		call.Kind = tool.Kind()
	}
	err := tool.Prepare(call, agent)
	call.recordFacts()
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			return tool, &Decision{Rule: r.Rule, Reason: r.Reason}
		}
		return tool, &Decision{Rule: "args.invalid", Reason: err.Error()}
	}
	return tool, nil
}

func (g *Gateway) entry(call *Call, tool Tool, dec Decision) *Entry {
	kind := call.Kind
	if kind == "" {
		kind = KindTool
	}
	args := call.Args
	if len(args) > 0 && !json.Valid(args) {
		args, _ = json.Marshal(map[string]int{"invalidJSONBytes": len(args)})
	} else if aa, ok := tool.(AuditArgs); ok && len(args) > 0 {
		args = aa.AuditArgs(call)
	}
	detail := call.Detail
	// Only an allowed call gives its labels; the entry says which.
	labels := dec.Allow && len(dec.Labels) > 0
	if dec.Shadow != nil || labels {
		detail = maps.Clone(detail)
		if detail == nil {
			detail = map[string]any{}
		}
	}
	if dec.Shadow != nil {
		detail["shadow"] = dec.Shadow
	}
	if labels {
		detail["labels"] = dec.Labels
		if t := call.Target(); t != "" {
			detail["target"] = t // where the labels came from, for a person and for Rebuild
		}
	}
	return g.bounded(&Entry{
		TS:       time.Now().UTC(),
		ID:       call.ID,
		Phase:    PhaseDecision,
		Agent:    call.Agent,
		Type:     kind,
		Tool:     call.Tool,
		Via:      call.Via,
		Args:     args,
		Decision: dec.Verdict(),
		Rule:     dec.Rule,
		Reason:   dec.Reason,
		Session:  call.Session,
		Parent:   call.Parent,
		Detail:   detail,
	})
}
