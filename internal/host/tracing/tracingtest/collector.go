// Package tracingtest is a real OTLP/HTTP trace receiver for tests: it
// decodes the protobuf export requests an exporter sends and keeps the spans.
package tracingtest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Collector receives OTLP/HTTP trace exports at URL + /v1/traces.
type Collector struct {
	URL string

	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []*tracepb.ResourceSpans
	raw       [][]byte
}

// New starts a collector on loopback, closed when the test ends.
func New(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// NewGRPC starts a collector taking OTLP/gRPC exports in plain text on
// loopback; its URL is the host:port to send to.
func NewGRPC(t testing.TB) *Collector {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Collector{URL: lis.Addr().String()}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcReceiver{c: c})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return c
}

type grpcReceiver struct {
	coltrace.UnimplementedTraceServiceServer
	c *Collector
}

func (g grpcReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	g.c.Add(req, raw)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP takes one export request, as a collector does.
func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.Add(&req, b)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Add keeps the spans of one export request and its encoded bytes (a gRPC
// receiver hands its requests here too).
func (c *Collector) Add(req *coltrace.ExportTraceServiceRequest, raw []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw = append(c.raw, raw)
	for _, rs := range req.ResourceSpans {
		c.resources = append(c.resources, rs)
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
}

// Spans are the spans received so far.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// Resources are the resource spans received so far.
func (c *Collector) Resources() []*tracepb.ResourceSpans {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.ResourceSpans(nil), c.resources...)
}

// Raw are the encoded export requests as they arrived.
func (c *Collector) Raw() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.raw...)
}

// Tree indexes spans by the call they trace (toolgate.call.id) and by parent.
type Tree struct {
	ByCall   map[string]*tracepb.Span
	children map[string][]*tracepb.Span
}

// NewTree indexes spans.
func NewTree(spans []*tracepb.Span) *Tree {
	t := &Tree{ByCall: map[string]*tracepb.Span{}, children: map[string][]*tracepb.Span{}}
	for _, s := range spans {
		if id := Attr(s, "toolgate.call.id"); id != "" {
			t.ByCall[id] = s
		}
		p := hex.EncodeToString(s.ParentSpanId)
		t.children[p] = append(t.children[p], s)
	}
	return t
}

// Calls are the call spans directly beneath s.
func (t *Tree) Calls(s *tracepb.Span) []*tracepb.Span {
	var out []*tracepb.Span
	for _, c := range t.children[hex.EncodeToString(s.SpanId)] {
		if Attr(c, "toolgate.call.id") != "" {
			out = append(out, c)
		}
	}
	return out
}

// Phases names the phase spans beneath s, in the order they ended.
func (t *Tree) Phases(s *tracepb.Span) []string {
	var out []string
	for _, c := range t.children[hex.EncodeToString(s.SpanId)] {
		if Attr(c, "toolgate.call.id") == "" {
			out = append(out, c.Name)
		}
	}
	return out
}

// Attr is a span attribute's value as text ("" when absent); values that
// are not strings come in the protobuf's text form.
func Attr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			if v := a.Value.GetStringValue(); v != "" {
				return v
			}
			return a.Value.String()
		}
	}
	return ""
}

// ResourceAttr is a resource attribute's string value.
func ResourceAttr(rs *tracepb.ResourceSpans, key string) string {
	for _, a := range rs.Resource.Attributes {
		if a.Key == key {
			return a.Value.GetStringValue()
		}
	}
	return ""
}
