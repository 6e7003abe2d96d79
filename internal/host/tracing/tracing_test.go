package tracing_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	_ "github.com/toolgate/toolgate/internal/host/door/modeldoor/scripted"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/metrics"
	"github.com/toolgate/toolgate/internal/host/plugin"
	"github.com/toolgate/toolgate/internal/host/policy"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/host/tracing"
	"github.com/toolgate/toolgate/internal/host/tracing/tracingtest"
)

// argMarker is argument content: it must never leave the host in a trace.
const argMarker = "content-that-stays-home"

// spawnGW is the gateway the spawn plugin calls back into, as an exec's
// process calls a plugin through its launcher while the exec runs.
var spawnGW struct {
	sync.Mutex
	gw *gateway.Gateway
}

func init() {
	plugin.RegisterBuiltin("tracing-spawn", func(ctx context.Context, inv *plugin.Invocation) (int, error) {
		spawnGW.Lock()
		gw := spawnGW.gw
		spawnGW.Unlock()
		_, err := gw.Handle(ctx, &gateway.Call{Agent: inv.Call.Agent, Tool: "echo", Parent: inv.Call.ID,
			Args: json.RawMessage(`{"argv":["nested"]}`)}, nil)
		return 0, err
	})
}

type harness struct {
	gw     *gateway.Gateway
	door   *modeldoor.Door
	tracer *tracing.Tracer
	col    *tracingtest.Collector
}

func newHarness(t *testing.T, otlp *config.OTLP, col *tracingtest.Collector) *harness {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	if err := os.WriteFile(script, []byte("turns:\n  - say: I spawn.\n    tools:\n      - {name: spawn, input: {argv: [go]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`
gateway:
  models:
    scripted: {api: anthropic, kind: scripted, script: %s}
plugins:
  echo: {kind: builtin, builtin: toolgate-echo}
  spawn: {kind: builtin, builtin: tracing-spawn}
agents:
  demo:
    tools: [echo, spawn]
    model: {providers: [scripted]}
    rules:
      - deny: tool == "echo" && "forbidden" in argv
        reason: not this one
      - deny: kind == "model" && args.model == "kept-for-humans"
        reason: not this model
  other:
    tools: [echo]
`, script)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(dir, path)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := secrets.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := plugin.Build(cfg, plugin.Env{Secrets: sec})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := modeldoor.NewTool(cfg, sec, modeldoor.NewMeter(), modeldoor.Env{})
	if err != nil {
		t.Fatal(err)
	}
	snap := &gateway.Snapshot{Agents: map[string]gateway.AgentInfo{}, Tools: tools,
		ByKind: map[gateway.Kind]gateway.Tool{gateway.KindModel: mt}, Decider: eng}
	for name := range cfg.Agents {
		snap.Agents[name] = gateway.AgentInfo{Name: name}
	}
	aw, err := audit.Open(filepath.Join(dir, "logs"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aw.Close() })

	h := &harness{col: col}
	h.tracer, err = tracing.New(context.Background(), otlp, "gw-test",
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.tracer.Shutdown(context.Background()) })
	// Metrics beside the tracer, as the daemon wires them: both observe.
	m := metrics.New(metrics.Sources{})
	h.gw = gateway.New(gateway.Options{Audit: aw, BoundArgs: audit.NewBounder(1024).Bound,
		Observer: gateway.Observers{m, h.tracer}}, snap)
	spawnGW.Lock()
	spawnGW.gw = h.gw
	spawnGW.Unlock()
	h.door = modeldoor.New(h.gw)
	return h
}

// call runs a plugin call and returns its audit id.
func (h *harness) call(t *testing.T, agent, tool, parent string, argv ...string) string {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"argv": argv})
	c := &gateway.Call{Agent: agent, Tool: tool, Args: args, Parent: parent, Session: "sess-1"}
	_, _ = h.gw.Handle(context.Background(), c, nil)
	return c.ID
}

// The span tree of a model call with a tool call beneath it (through the
// tool_use id its answer gave), a plugin call that tool made while it ran
// beneath that, each with its phases; a lone call as a root whose trace id
// is its audit id; a denial without an execute phase; and no argument
// content in what was sent.
func TestSpanTree(t *testing.T) {
	col := tracingtest.New(t)
	h := newHarness(t, &config.OTLP{Endpoint: col.URL, Protocol: config.OTLPHTTP}, col)
	resp, err := h.door.Send(context.Background(), &modeldoor.Request{Agent: "demo", Provider: "scripted", Session: "sess-1",
		Path: "/v1/messages", Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"model":"scripted","max_tokens":100,"messages":[{"role":"user","content":"` + argMarker + `"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Content []struct{ Type, ID, Name string }
	}
	// Read to the end, as the agent loop does: the answer ends once its
	// result (with the tool_use ids) is recorded. Closed early, the door
	// reads on for the usage and records it later, after the tool call below.
	err = json.NewDecoder(resp.Body).Decode(&answer)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("model answer %d: %v", resp.StatusCode, err)
	}
	var toolUse string
	for _, c := range answer.Content {
		if c.Type == "tool_use" && c.Name == "spawn" {
			toolUse = c.ID
		}
	}
	if toolUse == "" {
		t.Fatalf("no tool_use in the answer: %+v", answer)
	}
	resp, err = h.door.Send(context.Background(), &modeldoor.Request{Agent: "demo", Provider: "scripted", Path: "/v1/messages",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"model":"kept-for-humans","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spawn := h.call(t, "demo", "spawn", toolUse, argMarker) // as the agent loop does: parent = the tool_use id
	lone := h.call(t, "demo", "echo", "", argMarker)
	denied := h.call(t, "demo", "echo", "", "forbidden")
	stranger := h.call(t, "other", "echo", spawn, "x") // another agent naming demo's call
	if err := h.tracer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	tree := tracingtest.NewTree(h.col.Spans())
	byCall, attr := tree.ByCall, tracingtest.Attr
	names := func(s *tracepb.Span) string { return strings.Join(tree.Phases(s), ",") }

	var modelSpan, deniedModel *tracepb.Span
	for _, s := range byCall {
		switch {
		case attr(s, "toolgate.kind") != "model":
		case attr(s, "toolgate.decision") == "deny":
			deniedModel = s
		default:
			modelSpan = s
		}
	}
	if deniedModel == nil || deniedModel.Name != "chat kept-for-humans" || attr(deniedModel, "gen_ai.response.model") != "" ||
		names(deniedModel) != "decide,audit write" {
		t.Errorf("denied model call: %v, phases %s", deniedModel, names(deniedModel))
	}
	if modelSpan == nil {
		t.Fatalf("no model call span among %d spans", len(h.col.Spans()))
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
		"gen_ai.request.model": "scripted", "gen_ai.response.model": "scripted", "gen_ai.conversation.id": "sess-1",
		"gen_ai.agent.name": "demo"} {
		if got := attr(modelSpan, k); got != want {
			t.Errorf("model span %s = %q, want %q", k, got, want)
		}
	}
	if modelSpan.Name != "chat scripted" || modelSpan.Kind != tracepb.Span_SPAN_KIND_CLIENT || len(modelSpan.ParentSpanId) != 0 {
		t.Errorf("model span: %q kind %v parent %x", modelSpan.Name, modelSpan.Kind, modelSpan.ParentSpanId)
	}
	if attr(modelSpan, "gen_ai.usage.input_tokens") == "" || attr(modelSpan, "gen_ai.usage.output_tokens") == "" {
		t.Errorf("model span without usage: %v", modelSpan.Attributes)
	}
	if hex.EncodeToString(modelSpan.TraceId) != attr(modelSpan, "toolgate.call.id") {
		t.Errorf("a root call's trace id is its audit id: %x vs %s", modelSpan.TraceId, attr(modelSpan, "toolgate.call.id"))
	}
	if got := names(modelSpan); got != "decide,audit write,POST,execute" {
		t.Errorf("model call's phases: %s", got)
	}

	s := byCall[spawn]
	if s == nil || !bytes.Equal(s.ParentSpanId, modelSpan.SpanId) || !bytes.Equal(s.TraceId, modelSpan.TraceId) {
		t.Fatalf("tool call not beneath the model call: %+v", s)
	}
	if s.Name != "execute_tool spawn" || attr(s, "gen_ai.tool.call.id") != toolUse || attr(s, "gen_ai.tool.name") != "spawn" {
		t.Errorf("tool call span: %q %v", s.Name, s.Attributes)
	}
	if got := names(s); got != "decide,audit write,execute" {
		t.Errorf("tool call's phases: %s", got)
	}
	var nested *tracepb.Span
	if calls := tree.Calls(s); len(calls) == 1 {
		nested = calls[0]
	}
	if nested == nil || attr(nested, "gen_ai.tool.name") != "echo" || !bytes.Equal(nested.TraceId, modelSpan.TraceId) {
		t.Fatalf("the call made while the tool ran is not beneath it: %v", names(s))
	}
	if nested.StartTimeUnixNano < s.StartTimeUnixNano || nested.EndTimeUnixNano > s.EndTimeUnixNano {
		t.Errorf("nested call outside its parent's time")
	}

	l := byCall[lone]
	if l == nil || len(l.ParentSpanId) != 0 || hex.EncodeToString(l.TraceId) != lone || names(l) != "decide,audit write,execute" {
		t.Errorf("lone call: %+v", l)
	}
	if d := byCall[denied]; d == nil || attr(d, "toolgate.decision") != "deny" || names(d) != "decide,audit write" {
		t.Errorf("denied call: %v phases %s", d, names(d))
	}
	if x := byCall[stranger]; x == nil || len(x.ParentSpanId) != 0 || hex.EncodeToString(x.TraceId) != stranger {
		t.Errorf("another agent's call joined demo's trace: %+v", x)
	}
	for _, rs := range h.col.Resources() {
		if got := tracingtest.ResourceAttr(rs, "service.instance.id"); got != "gw-test" {
			t.Errorf("resource service.instance.id %q", got)
		}
	}
	for _, b := range h.col.Raw() {
		if bytes.Contains(b, []byte(argMarker)) {
			t.Fatal("argument content left the host in a trace")
		}
	}
}

// protocol: grpc sends the same spans to an OTLP/gRPC receiver.
func TestGRPC(t *testing.T) {
	col := tracingtest.NewGRPC(t)
	h := newHarness(t, &config.OTLP{Endpoint: col.URL, Protocol: config.OTLPGRPC, Insecure: true}, col)
	id := h.call(t, "demo", "echo", "", "hi")
	if err := h.tracer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	tree := tracingtest.NewTree(col.Spans())
	s := tree.ByCall[id]
	if s == nil || s.Name != "execute_tool echo" || hex.EncodeToString(s.TraceId) != id ||
		strings.Join(tree.Phases(s), ",") != "decide,audit write,execute" {
		t.Fatalf("over gRPC: %+v", s)
	}
}
