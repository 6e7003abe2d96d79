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
	"strings"
	"sync"
	"testing"
	"time"
)

// memSink records entries in memory; fail makes every Append fail.
type memSink struct {
	mu      sync.Mutex
	entries []*Entry
	fail    error
}

func (m *memSink) Append(e *Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.entries = append(m.entries, e)
	return nil
}

// fakeTool counts runs; denyArg makes Prepare reject {"bad":true}.
type fakeTool struct {
	mu   sync.Mutex
	runs int
}

func (t *fakeTool) Name() string { return "echo" }
func (t *fakeTool) Kind() Kind   { return KindTool }
func (t *fakeTool) Prepare(call *Call, _ AgentInfo) error {
	if strings.Contains(string(call.Args), `"bad"`) {
		return errors.New("echo: bad argument")
	}
	call.Argv = []string{"x"}
	return nil
}
func (t *fakeTool) Run(ctx context.Context, call *Call, env *RunEnv) (*Result, error) {
	t.mu.Lock()
	t.runs++
	t.mu.Unlock()
	code := 0
	return &Result{ExitCode: &code, Output: "ran"}, nil
}

type denyTool struct{}

func (denyTool) Decide(call *Call) Decision {
	if call.Argv != nil && strings.Contains(string(call.Args), "forbidden") {
		return Decision{Rule: "rules[0]", Reason: "forbidden"}
	}
	return Decision{Allow: true, Rule: "default"}
}

func newTestGateway(sink *memSink, tool *fakeTool) *Gateway {
	return New(Options{Audit: sink}, &Snapshot{
		Agents:  map[string]AgentInfo{"a": {Name: "a"}},
		Tools:   map[string]Tool{"echo": tool},
		Decider: denyTool{},
	})
}

func TestHandle(t *testing.T) {
	cases := []struct {
		name     string
		agent    string
		tool     string
		args     string
		wantRule string // empty: allowed
		wantRuns int
		entries  int
	}{
		{"allowed", "a", "echo", `{}`, "", 1, 2},
		{"denied by policy", "a", "echo", `{"x":"forbidden"}`, "rules[0]", 0, 1},
		{"unknown agent", "nobody", "echo", `{}`, "agent.unknown", 0, 1},
		{"unknown tool", "a", "rm", `{}`, "tool.unknown", 0, 1},
		{"malformed JSON", "a", "echo", `{"x":`, "args.invalid", 0, 1},
		{"bad arguments", "a", "echo", `{"bad":true}`, "args.invalid", 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sink, tool := &memSink{}, &fakeTool{}
			g := newTestGateway(sink, tool)
			call := &Call{Agent: c.agent, Tool: c.tool, Args: json.RawMessage(c.args)}
			res, err := g.Handle(context.Background(), call, nil)
			if c.wantRule == "" {
				if err != nil || res == nil {
					t.Fatalf("want allowed, got %v", err)
				}
			} else {
				var denied *DeniedError
				if !errors.As(err, &denied) || denied.Decision.Rule != c.wantRule || denied.ID != call.ID {
					t.Fatalf("want denial by %s, got %v", c.wantRule, err)
				}
			}
			if tool.runs != c.wantRuns {
				t.Errorf("tool ran %d times, want %d", tool.runs, c.wantRuns)
			}
			if len(sink.entries) != c.entries {
				t.Fatalf("%d audit entries, want %d", len(sink.entries), c.entries)
			}
			first := sink.entries[0]
			if first.Phase != PhaseDecision || first.ID != call.ID || !json.Valid(first.Args) {
				t.Errorf("decision entry %+v", first)
			}
			if c.wantRule != "" && (first.Decision != "deny" || first.Rule != c.wantRule) {
				t.Errorf("denial recorded as %s/%s", first.Decision, first.Rule)
			}
			if c.entries == 2 && (sink.entries[1].Phase != PhaseResult || sink.entries[1].DurationMs == nil || *sink.entries[1].ExitCode != 0) {
				t.Errorf("result entry %+v", sink.entries[1])
			}
		})
	}
}

// TestFailClosed: when the decision cannot be recorded, nothing runs.
func TestFailClosed(t *testing.T) {
	sink, tool := &memSink{fail: errors.New("disk full")}, &fakeTool{}
	g := newTestGateway(sink, tool)
	_, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`)}, nil)
	if !errors.Is(err, ErrAuditUnavailable) {
		t.Fatalf("want ErrAuditUnavailable, got %v", err)
	}
	if tool.runs != 0 {
		t.Fatal("tool ran without a recorded decision")
	}
}

func TestRefuseAndStats(t *testing.T) {
	sink, tool := &memSink{}, &fakeTool{}
	g := newTestGateway(sink, tool)
	err := g.Refuse("127.0.0.1", &Call{Kind: KindAdmin, Tool: "GET /v1/agents"}, Decision{Allow: true, Rule: "auth.token", Reason: "no token"})
	var denied *DeniedError
	if !errors.As(err, &denied) || denied.Decision.Allow || denied.Decision.Rule != "auth.token" {
		t.Fatalf("Refuse answered %v, want a denial", err)
	}
	if e := sink.entries[0]; e.Decision != "deny" || e.Agent != "" || e.Type != KindAdmin || e.ID == "" || e.ID != denied.ID {
		t.Fatalf("refusal recorded as %+v (answer id %s)", e, denied.ID)
	}
	g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`)}, nil)
	g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{"x":"forbidden"}`)}, nil)
	if s := g.Stats("a"); s.Calls.Load() != 2 || s.Denials.Load() != 1 {
		t.Fatalf("stats calls=%d denials=%d", s.Calls.Load(), s.Denials.Load())
	}
	// A refusal at an entry point counts as a denied call, once it is recorded.
	if err := g.Refuse("a", &Call{Agent: "a", Kind: KindEgress, Tool: "connect"}, Decision{Rule: "egress.allowlist"}); !errors.As(err, &denied) {
		t.Fatal(err)
	}
	sink.fail = errors.New("disk full")
	if err := g.Refuse("a", &Call{Agent: "a", Kind: KindEgress, Tool: "connect"}, Decision{Rule: "egress.allowlist"}); !errors.Is(err, ErrAuditUnavailable) {
		t.Fatalf("Refuse with a failing sink returned %v, want ErrAuditUnavailable", err)
	}
	if s := g.Stats("a"); s.Calls.Load() != 3 || s.Denials.Load() != 2 {
		t.Fatalf("after refusals: stats calls=%d denials=%d, want 3 and 2", s.Calls.Load(), s.Denials.Load())
	}
}

// TestSwapKeepsInFlight: a reload swaps the snapshot; later calls see the new one.
func TestSwap(t *testing.T) {
	sink, tool := &memSink{}, &fakeTool{}
	g := newTestGateway(sink, tool)
	old := g.Swap(&Snapshot{Agents: map[string]AgentInfo{}, Tools: map[string]Tool{}, Decider: denyTool{}})
	if old.Agents["a"].Name != "a" {
		t.Fatal("Swap did not return the old snapshot")
	}
	_, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo"}, nil)
	var denied *DeniedError
	if !errors.As(err, &denied) || denied.Decision.Rule != "agent.unknown" {
		t.Fatalf("after swap: %v", err)
	}
}

func TestNewIDUniqueAndOrdered(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := NewID()
		if seen[id] || len(id) != 32 {
			t.Fatalf("bad id %q", id)
		}
		if id[:16] < prev {
			t.Fatalf("ids not time-ordered: %s after %s", id, prev)
		}
		seen[id], prev = true, id[:16]
	}
}

// queueSink records which path each entry took.
type queueSink struct {
	memSink
	queued []*Entry
}

func (q *queueSink) Enqueue(e *Entry) { q.queued = append(q.queued, e) }

// TestAsyncResults: with AsyncResults the result entry is enqueued, the
// decision still appended (durable) before the tool runs.
func TestAsyncResults(t *testing.T) {
	for _, async := range []bool{false, true} {
		sink, tool := &queueSink{}, &fakeTool{}
		g := New(Options{Audit: sink, AsyncResults: async}, newTestGateway(&sink.memSink, tool).Snapshot())
		if _, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
		wantQueued := 0
		if async {
			wantQueued = 1
		}
		if len(sink.queued) != wantQueued || len(sink.entries) != 2-wantQueued || sink.entries[0].Phase != PhaseDecision {
			t.Fatalf("async=%v: appended %d, queued %d", async, len(sink.entries), len(sink.queued))
		}
	}
}

// blockTool runs until release is closed.
type blockTool struct {
	fakeTool
	started, release chan struct{}
}

func (t *blockTool) Run(ctx context.Context, call *Call, env *RunEnv) (*Result, error) {
	close(t.started)
	<-t.release
	return t.fakeTool.Run(ctx, call, env)
}

// TestWaitForCallsInFlight: Wait holds a shutdown until running calls have
// handed their result entries to the sink.
func TestWaitForCallsInFlight(t *testing.T) {
	sink := &memSink{}
	tool := &blockTool{started: make(chan struct{}), release: make(chan struct{})}
	g := New(Options{Audit: sink}, &Snapshot{
		Agents: map[string]AgentInfo{"a": {Name: "a"}}, Tools: map[string]Tool{"echo": tool}, Decider: denyTool{},
	})
	if err := g.Wait(context.Background()); err != nil {
		t.Fatalf("Wait with nothing running: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`)}, nil)
		done <- err
	}()
	<-tool.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait returned %v while a call runs", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- g.Wait(context.Background()) }()
	close(tool.release)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	n := len(sink.entries)
	sink.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d entries when Wait returned, want decision and result", n)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type shadowDecider struct{}

func (shadowDecider) Decide(*Call) Decision {
	return Decision{Allow: true, Rule: "default", Shadow: &Shadow{Verdict: "deny", Rule: "new-rule", Matched: []string{"new-rule"}}}
}

// TestShadowRecorded: a shadow verdict lands in the decision entry's detail
// and the call still runs; the call's own detail map is not written to.
func TestShadowRecorded(t *testing.T) {
	sink, tool := &memSink{}, &fakeTool{}
	g := New(Options{Audit: sink}, &Snapshot{Agents: map[string]AgentInfo{"a": {Name: "a"}},
		Tools: map[string]Tool{"echo": tool}, Decider: shadowDecider{}})
	call := &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`), Detail: map[string]any{"peer": "x"}}
	if _, err := g.Handle(context.Background(), call, nil); err != nil || tool.runs != 1 {
		t.Fatalf("shadow denial enforced: %v, runs %d", err, tool.runs)
	}
	s, ok := sink.entries[0].Detail["shadow"].(*Shadow)
	if !ok || s.Verdict != "deny" || s.Rule != "new-rule" || sink.entries[0].Detail["peer"] != "x" {
		t.Errorf("decision detail %v", sink.entries[0].Detail)
	}
	if _, leaked := call.Detail["shadow"]; leaked {
		t.Error("the call's detail map was written")
	}
}

type capLimiter struct{ admitted, done int }

func (l *capLimiter) Admit(call *Call) (func(), *Decision) {
	if l.admitted >= 1 {
		return nil, &Decision{Rule: "rate.echo", Reason: "over 1 echo call per minute"}
	}
	l.admitted++
	return func() { l.done++ }, nil
}

// TestLimiterDenialRecorded: a call over a limit is a recorded denial that
// never runs; an admitted call ends its count when it ends.
func TestLimiterDenialRecorded(t *testing.T) {
	sink, tool, lim := &memSink{}, &fakeTool{}, &capLimiter{}
	g := New(Options{Audit: sink, Limiter: lim}, &Snapshot{Agents: map[string]AgentInfo{"a": {Name: "a"}},
		Tools: map[string]Tool{"echo": tool}, Decider: denyTool{}})
	if _, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`)}, nil)
	var denied *DeniedError
	if !errors.As(err, &denied) || denied.Decision.Rule != "rate.echo" || tool.runs != 1 || lim.done != 1 {
		t.Fatalf("over the limit: %v, runs %d, done %d", err, tool.runs, lim.done)
	}
	last := sink.entries[len(sink.entries)-1]
	if last.Decision != "deny" || last.Rule != "rate.echo" || last.Reason != "over 1 echo call per minute" {
		t.Errorf("entry %+v", last)
	}
	// A policy denial is not counted against a limit.
	if _, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{"x":"forbidden"}`)}, nil); !errors.As(err, &denied) || denied.Decision.Rule != "rules[0]" {
		t.Errorf("policy denial: %v", err)
	}
}

// admitTool refuses under a rule of its own: from Prepare for {"gone":…},
// from Admit for {"stale":…}; it counts the times Admit was asked.
type admitTool struct {
	fakeTool
	admits int
}

func (t *admitTool) Prepare(call *Call, a AgentInfo) error {
	if strings.Contains(string(call.Args), `"gone"`) {
		return fmt.Errorf("wrapped: %w", &Refusal{Rule: "tool.pin", Reason: "no longer approved"})
	}
	return t.fakeTool.Prepare(call, a)
}

func (t *admitTool) Admit(_ context.Context, call *Call) *Refusal {
	t.admits++
	if strings.Contains(string(call.Args), `"stale"`) {
		return &Refusal{Rule: "tool.pin", Reason: "changed upstream"}
	}
	return nil
}

// A tool's own refusal is a denial under its rule, recorded before anything
// runs; Admit is asked only when policy lets the call through.
func TestToolRefusals(t *testing.T) {
	cases := []struct {
		args, wantRule string
		wantAdmits     int
	}{
		{`{"ok":1}`, "default", 1},
		{`{"gone":1}`, "tool.pin", 0},
		{`{"stale":1}`, "tool.pin", 1},
		{`{"stale":1,"x":"forbidden"}`, "rules[0]", 0},
		{`{"bad":1}`, "args.invalid", 0},
	}
	for _, c := range cases {
		sink := &memSink{}
		tool := &admitTool{}
		g := New(Options{Audit: sink}, &Snapshot{Agents: map[string]AgentInfo{"a": {Name: "a"}},
			Tools: map[string]Tool{"echo": tool}, Decider: denyTool{}})
		_, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(c.args)}, nil)
		first := sink.entries[0]
		if first.Rule != c.wantRule || tool.admits != c.wantAdmits {
			t.Errorf("%s: rule %q after %d admits, want %q after %d", c.args, first.Rule, tool.admits, c.wantRule, c.wantAdmits)
		}
		if denied := (c.wantRule != "default"); denied != (err != nil) || denied != (tool.runs == 0) || (denied && first.Decision != "deny") {
			t.Errorf("%s: err %v, %d runs, decision %s", c.args, err, tool.runs, first.Decision)
		}
	}
}

// recorder notes what an observer is told, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
	stats  []CallStats
}

func (r *recorder) StartCall(c CallStats)   { r.note("start", c) }
func (r *recorder) ObserveCall(c CallStats) { r.note("end", c) }
func (r *recorder) note(what string, c CallStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, what+" "+c.ID)
	r.stats = append(r.stats, c)
}

// endOnly is an Observer that is not a CallStarter.
type endOnly struct{ n int }

func (e *endOnly) ObserveCall(CallStats) { e.n++ }

// Observers tell each observer the end of a call, and its start to those
// that are CallStarters, before the call runs; the stats carry the call's
// identity and hints.
func TestObservers(t *testing.T) {
	rec, plain := &recorder{}, &endOnly{}
	tool := &fakeTool{}
	g := New(Options{Audit: &memSink{}, Observer: Observers{rec, plain}}, &Snapshot{
		Agents: map[string]AgentInfo{"a": {Name: "a"}}, Tools: map[string]Tool{"echo": tool}, Decider: denyTool{}})
	call := &Call{Agent: "a", Tool: "echo", Parent: "p-1", Session: "s-1", Via: "test", Args: json.RawMessage(`{}`)}
	if _, err := g.Handle(context.Background(), call, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.events, ","); got != "start "+call.ID+",end "+call.ID || plain.n != 1 {
		t.Fatalf("events %q, plain observer told %d times", got, plain.n)
	}
	for _, c := range rec.stats {
		if c.Agent != "a" || c.Parent != "p-1" || c.Session != "s-1" || c.Via != "test" || c.Start.IsZero() {
			t.Errorf("stats without the call's identity: %+v", c)
		}
	}
	if end := rec.stats[1]; end.Decision != "allow" || end.Tool != "echo" || !end.Start.Equal(rec.stats[0].Start) {
		t.Errorf("end stats: %+v", end)
	}
}

// askAll sends every call to a person.
type askAll struct{}

func (askAll) Decide(*Call) Decision {
	return Decision{Ask: true, Rule: "ask-all", Reason: "a person decides"}
}

// approveAll approves every call, keeping the input each was shown.
type approveAll struct {
	mu    sync.Mutex
	shown [][]byte
}

func (a *approveAll) Await(_ context.Context, call *Call, _ Decision, _ time.Duration) Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shown = append(a.shown, call.Input)
	return Approval{Allow: true, Outcome: "approved", By: "test"}
}

// stdinTool reads its whole input.
type stdinTool struct{ fakeTool }

func (t *stdinTool) Run(ctx context.Context, call *Call, env *RunEnv) (*Result, error) {
	b, err := io.ReadAll(env.IO.Stdin)
	code := 0
	return &Result{ExitCode: &code, Output: string(b)}, err
}

// TestAskHoldsTheInput: a call that asks a person has its input read whole
// first; the person is shown it, the tool gets those very bytes, and the
// entries record their size and digest. An input too large to show, one
// that does not end, or a caller gone meanwhile denies the call unasked.
func TestAskHoldsTheInput(t *testing.T) {
	defer func(w time.Duration) { askInputWait = w }(askInputWait)
	askInputWait = 500 * time.Millisecond
	never, _ := io.Pipe()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name   string
		ctx    context.Context
		stdin  io.Reader
		denied string // "" when approved
	}{
		{"input shown and used", context.Background(), strings.NewReader("apply: harmless\n"), ""},
		{"empty input", context.Background(), strings.NewReader(""), ""},
		{"over the limit", context.Background(), strings.NewReader(strings.Repeat("x", MaxAskInput+1)), "over 1048576 bytes"},
		{"never ends", context.Background(), never, "did not end within 500ms"},
		{"caller gone", gone, never, "the caller went away"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink, ap, tool := &memSink{}, &approveAll{}, &stdinTool{}
			g := New(Options{Audit: sink, Approvals: ap}, &Snapshot{Agents: map[string]AgentInfo{"a": {Name: "a"}},
				Tools: map[string]Tool{"echo": tool}, Decider: askAll{}})
			var sent []byte
			if c.denied == "" {
				sent, _ = io.ReadAll(c.stdin)
				c.stdin = bytes.NewReader(sent)
			}
			res, err := g.Handle(c.ctx, &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`)}, &Streams{Stdin: c.stdin})
			if c.denied != "" {
				var d *DeniedError
				if !errors.As(err, &d) || d.Decision.Rule != "ask-all" || !strings.Contains(d.Decision.Reason, c.denied) || len(ap.shown) != 0 {
					t.Fatalf("want a denial by ask-all saying %q, nobody asked; got %v (asked %d)", c.denied, err, len(ap.shown))
				}
				return
			}
			if err != nil || res.Output != string(sent) || len(ap.shown) != 1 || !bytes.Equal(ap.shown[0], sent) || ap.shown[0] == nil {
				t.Fatalf("tool got %v (%v), person shown %q; sent %q", res, err, ap.shown, sent)
			}
			sum := sha256.Sum256(sent)
			for _, e := range sink.entries {
				in, _ := e.Detail["input"].(map[string]any)
				if in["bytes"] != len(sent) || in["sha256"] != hex.EncodeToString(sum[:]) {
					t.Errorf("%s entry records input %v", e.Phase, e.Detail["input"])
				}
			}
		})
	}
}

// holdTool holds its input in the call, as the model door holds a body.
type holdTool struct{ fakeTool }

func (*holdTool) HeldInput(call *Call) []byte { return []byte("body of " + call.Tool) }

// TestAskShowsHeldInput: a tool that holds its input has it shown to the
// person and recorded by digest, as a streamed input is.
func TestAskShowsHeldInput(t *testing.T) {
	sink, ap := &memSink{}, &approveAll{}
	g := New(Options{Audit: sink, Approvals: ap}, &Snapshot{Agents: map[string]AgentInfo{"a": {Name: "a"}},
		Tools: map[string]Tool{"echo": &holdTool{}}, Decider: askAll{}})
	if _, err := g.Handle(context.Background(), &Call{Agent: "a", Tool: "echo", Args: json.RawMessage(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("body of echo"))
	if len(ap.shown) != 1 || string(ap.shown[0]) != "body of echo" {
		t.Fatalf("shown %q", ap.shown)
	}
	if in, _ := sink.entries[0].Detail["input"].(map[string]any); in["sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("ask entry records input %v", sink.entries[0].Detail["input"])
	}
}
