// Package tracing exports an OpenTelemetry trace of the gateway's calls over
// OTLP: one span per call with a child per phase (decide, audit write,
// execute, and a model call's upstream request), each call placed beneath
// the call its audit `parent` names — a model call, the tool calls its
// answer asked for, the plugin calls and egress of an exec. It is a
// gateway.Observer, off unless gateway.telemetry.otlp is configured.
//
// A root call's trace id is its audit id (both are 16 bytes), and a call's
// span id is the random half of its audit id: a trace leads to the audit
// entries and back. Spans carry names, kinds, decisions, timings and model
// usage, never argument content, results or error text.
package tracing

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Scope is the instrumentation scope of toolgate's spans.
const Scope = "github.com/toolgate/toolgate"

// maxPlaces bounds the calls (and tool_use ids) remembered so that later
// calls find their parent: two generations of this many.
const maxPlaces = 1 << 15

// Tracer implements gateway.CallStarter.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer

	mu       sync.Mutex
	cur, old map[string]place
}

var _ gateway.CallStarter = (*Tracer)(nil)

// place is where a call's span sits: its own ids and its parent's.
type place struct {
	agent    string
	self     trace.SpanContext
	parent   trace.SpanContext // invalid: a root
	toolCall string            // the model's tool_use id the call answers, if any
	toolUse  bool              // this place is a tool_use id of a model call's answer
}

// New starts exporting to the configured collector. gatewayID names this
// gateway in the traces (service.instance.id). Nothing is dialled yet: an
// unreachable collector costs the traces, never a call.
func New(ctx context.Context, o *config.OTLP, gatewayID string, log *slog.Logger) (*Tracer, error) {
	var exp sdktrace.SpanExporter
	var err error
	url := strings.Contains(o.Endpoint, "://")
	switch o.Protocol {
	case config.OTLPGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint)}
		if url {
			opts = []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(o.Endpoint)}
		}
		if o.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(o.Endpoint)}
		if url {
			opts = []otlptracehttp.Option{otlptracehttp.WithEndpointURL(o.Endpoint)}
		}
		if o.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway.telemetry.otlp: %w", err)
	}
	if log != nil {
		// The SDK reports a failed export through this global handler.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("traces not exported", "err", err) }))
	}
	return NewWithExporter(exp, gatewayID), nil
}

// NewWithExporter traces into exp, in batches off the call path.
func NewWithExporter(exp sdktrace.SpanExporter, gatewayID string) *Tracer {
	res := resource.NewSchemaless(attribute.String("service.name", "toolgate"),
		attribute.String("service.instance.id", gatewayID))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(ids{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	return &Tracer{provider: tp, tracer: tp.Tracer(Scope), cur: map[string]place{}, old: map[string]place{}}
}

// Flush exports the spans ended so far.
func (t *Tracer) Flush(ctx context.Context) error { return t.provider.ForceFlush(ctx) }

// Shutdown exports what is left and stops.
func (t *Tracer) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }

// StartCall implements gateway.CallStarter: the call's place is settled
// before it runs, so the calls it causes meanwhile find it.
func (t *Tracer) StartCall(c gateway.CallStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settle(c)
}

// settle finds a call's parent and remembers the call; t.mu is held.
// Only a parent of the same agent counts: a hint from one agent's sandbox
// cannot put its calls into another agent's trace.
func (t *Tracer) settle(c gateway.CallStats) place {
	p := place{agent: c.Agent}
	key := c.Parent
	if key == "" {
		key, _ = c.Detail["tool_use_id"].(string) // a hook's call answers a model's tool_use
	}
	if up, ok := t.lookup(key); ok && up.agent == c.Agent && key != c.ID {
		p.parent = up.self
		if up.toolUse {
			p.toolCall = key
		}
	}
	tid, sid := idsOf(c.ID)
	if p.parent.IsValid() {
		tid = p.parent.TraceID()
	}
	p.self = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	t.remember(c.ID, p)
	return p
}

func (t *Tracer) lookup(key string) (place, bool) {
	if key == "" {
		return place{}, false
	}
	if p, ok := t.cur[key]; ok {
		return p, true
	}
	p, ok := t.old[key]
	return p, ok
}

func (t *Tracer) remember(key string, p place) {
	if len(t.cur) >= maxPlaces {
		t.old, t.cur = t.cur, make(map[string]place, maxPlaces)
	}
	t.cur[key] = p
}

// ObserveCall implements gateway.Observer: the call's span and its phases,
// with the times the gateway measured.
func (t *Tracer) ObserveCall(c gateway.CallStats) {
	t.mu.Lock()
	p, ok := t.lookup(c.ID)
	if !ok {
		p = t.settle(c)
	}
	if c.Kind == gateway.KindModel {
		// The tool calls this answer asked for come next, naming its tool_use ids.
		for _, id := range strs(c.Detail[gateway.DetailToolUseIDs]) {
			t.remember(id, place{agent: c.Agent, self: p.self, toolUse: true})
		}
	}
	t.mu.Unlock()

	ctx := context.Background()
	if p.parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, p.parent)
	}
	ctx = context.WithValue(ctx, wantKey{}, p.self)
	name, kind, attrs := describe(c, p)
	_, span := t.tracer.Start(ctx, name, trace.WithTimestamp(c.Start), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	in := trace.ContextWithSpanContext(context.Background(), span.SpanContext())
	at := c.Start
	phase := func(name string, d time.Duration, kind trace.SpanKind, attrs ...attribute.KeyValue) trace.Span {
		_, s := t.tracer.Start(in, name, trace.WithTimestamp(at), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
		s.End(trace.WithTimestamp(at.Add(d)))
		return s
	}
	phase("decide", c.Decide, trace.SpanKindInternal)
	at = at.Add(c.Decide)
	phase("audit write", c.Record, trace.SpanKindInternal)
	at = at.Add(c.Record)
	if c.Decision == "allow" {
		if c.Kind == gateway.KindModel {
			t.upstream(in, at, c.Detail)
		}
		ex := phase("execute", c.Execute, trace.SpanKindInternal)
		if c.Failed {
			ex.SetStatus(codes.Error, "")
		}
		at = at.Add(c.Execute)
	}
	if c.Failed {
		span.SetAttributes(attribute.String("error.type", "tool_error"))
		span.SetStatus(codes.Error, "")
	}
	span.End(trace.WithTimestamp(at))
}

// upstream is a model call's request to its provider, inside execute: the
// door measured how long it took and when the first byte came.
func (t *Tracer) upstream(in context.Context, at time.Time, d map[string]any) {
	took, ok := millis(d["durationMs"])
	if !ok {
		return // it never reached the provider
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", "POST")}
	if api, _ := d["api"].(string); api != "" {
		attrs = append(attrs, attribute.String("gen_ai.provider.name", api))
	}
	if s, ok := number(d["status"]); ok {
		attrs = append(attrs, attribute.Int64("http.response.status_code", s))
	}
	if r, _ := d["remote"].(string); r != "" {
		if host, port, err := net.SplitHostPort(r); err == nil {
			attrs = append(attrs, attribute.String("network.peer.address", host))
			if n, err := strconv.Atoi(port); err == nil {
				attrs = append(attrs, attribute.Int("network.peer.port", n))
			}
		}
	}
	_, s := t.tracer.Start(in, "POST", trace.WithTimestamp(at), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if ttfb, ok := millis(d["ttfbMs"]); ok {
		s.AddEvent("first byte", trace.WithTimestamp(at.Add(ttfb)))
	}
	s.End(trace.WithTimestamp(at.Add(took)))
}

// describe names a call's span after the semantic conventions: GenAI
// inference for a model call, MCP for a call through the MCP door, GenAI
// tool execution for the other tools.
func describe(c gateway.CallStats, p place) (string, trace.SpanKind, []attribute.KeyValue) {
	kind := c.Kind
	if kind == "" {
		kind = gateway.KindTool
	}
	attrs := []attribute.KeyValue{
		attribute.String("toolgate.call.id", c.ID),
		attribute.String("toolgate.kind", string(kind)),
		attribute.String("toolgate.decision", c.Decision),
		attribute.String("gen_ai.agent.name", c.Agent),
	}
	if c.Via != "" {
		attrs = append(attrs, attribute.String("toolgate.via", c.Via))
	}
	if c.Session != "" {
		attrs = append(attrs, attribute.String("gen_ai.conversation.id", gateway.Cut(c.Session, gateway.MaxField)))
	}
	if kind == gateway.KindModel {
		return "chat " + model(c.Detail), trace.SpanKindClient, append(attrs, modelAttrs(c)...)
	}
	name, span := string(kind), trace.SpanKindInternal
	switch kind {
	case gateway.KindCore, gateway.KindTool:
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "execute_tool"))
		name = "execute_tool"
	}
	tool := gateway.Cut(c.Tool, gateway.MaxField) // a hook's tool is Claude Code's name for it
	if tool != "" {
		attrs = append(attrs, attribute.String("gen_ai.tool.name", tool))
		if tool != name {
			name += " " + tool
		}
	}
	if p.toolCall != "" {
		attrs = append(attrs, attribute.String("gen_ai.tool.call.id", p.toolCall))
	} else if id, _ := c.Detail["tool_use_id"].(string); id != "" && len(id) <= gateway.MaxField {
		attrs = append(attrs, attribute.String("gen_ai.tool.call.id", id))
	}
	if c.Via == "mcp" {
		// The gateway is the MCP server of this request.
		attrs = append(attrs, attribute.String("mcp.method.name", "tools/call"))
		name, span = "tools/call", trace.SpanKindServer
		if tool != "" {
			name += " " + tool
		}
	}
	return name, span, attrs
}

func modelAttrs(c gateway.CallStats) []attribute.KeyValue {
	d := c.Detail
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat")}
	if m := model(d); m != "" {
		// After an answer the door records the model that answered.
		attrs = append(attrs, attribute.String("gen_ai.request.model", m))
		if _, answered := d["status"]; answered {
			attrs = append(attrs, attribute.String("gen_ai.response.model", m))
		}
	}
	if api, _ := d["api"].(string); api != "" {
		attrs = append(attrs, attribute.String("gen_ai.provider.name", api))
	}
	for _, k := range [][2]string{
		{"inputTokens", "gen_ai.usage.input_tokens"},
		{"outputTokens", "gen_ai.usage.output_tokens"},
		{"cacheReadTokens", "gen_ai.usage.cache_read.input_tokens"},
		{"cacheWriteTokens", "gen_ai.usage.cache_creation.input_tokens"},
	} {
		if n, ok := number(d[k[0]]); ok {
			attrs = append(attrs, attribute.Int64(k[1], n))
		}
	}
	if s, _ := d["stopReason"].(string); s != "" && len(s) <= gateway.MaxField {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{s}))
	}
	if cost, ok := d["costUSD"].(float64); ok {
		attrs = append(attrs, attribute.Float64("toolgate.cost_usd", cost))
	}
	return attrs
}

// model is the model a call named, within the audit's field bound.
func model(d map[string]any) string {
	m, _ := d["model"].(string)
	if len(m) > gateway.MaxField {
		return ""
	}
	return m
}

func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		return int64(n), true
	}
	return 0, false
}

func millis(v any) (time.Duration, bool) {
	f, ok := v.(float64)
	return time.Duration(f * float64(time.Millisecond)), ok
}

func strs(v any) []string {
	switch s := v.(type) {
	case []string:
		return s
	case []any:
		out := make([]string, 0, len(s))
		for _, e := range s {
			if x, ok := e.(string); ok {
				out = append(out, x)
			}
		}
		return out
	}
	return nil
}

// idsOf derives a call's trace id (the whole audit id) and span id (its
// random half) from its audit id; an id of another form gets random ones.
func idsOf(callID string) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	var sid trace.SpanID
	if b, err := hex.DecodeString(callID); err == nil && len(b) == len(tid) {
		copy(tid[:], b)
		copy(sid[:], b[8:])
	}
	if !tid.IsValid() || !sid.IsValid() {
		return randomIDs()
	}
	return tid, sid
}

// wantKey carries the ids a call's span must have to its Start.
type wantKey struct{}

// ids gives a call's span the ids derived from its audit id, and phases
// random ones.
type ids struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(wantKey{}).(trace.SpanContext); ok {
		return sc.TraceID(), sc.SpanID()
	}
	return randomIDs()
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if sc, ok := ctx.Value(wantKey{}).(trace.SpanContext); ok {
		return sc.SpanID()
	}
	_, sid := randomIDs()
	return sid
}

func randomIDs() (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() || !sid.IsValid() {
		hi, lo, s := rand.Uint64(), rand.Uint64(), rand.Uint64()
		for i := range 8 {
			tid[i], tid[8+i], sid[i] = byte(hi>>(8*i)), byte(lo>>(8*i)), byte(s>>(8*i))
		}
	}
	return tid, sid
}
