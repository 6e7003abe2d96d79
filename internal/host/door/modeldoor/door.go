// Package modeldoor is the model door: an agent's model API requests
// (Anthropic Messages, OpenAI chat completions and Responses) go through
// the gateway's one pipeline as calls of kind model — decided by policy
// (provider, model allowlist, budgets, CEL rules), recorded before they
// run, forwarded to the configured upstream with the credential from host
// secrets, and recorded again with the usage, stop reason, tool_use ids
// and cost the answer reports. Streams (SSE) pass through as they arrive.
//
// Two entry points share one code path:
//
//   - the route on every agent socket, POST /v1/model/PROVIDER/PATH,
//     which the sandbox's forwarder reaches at a plain-HTTP base URL
//     (proto.ModelAddr); the caller is the agent whose socket accepted
//     the connection, and nothing it sends can change that;
//   - Door.Send, for toolgate's own agent loop in the gateway's process:
//     the same decision, budget and audit entries as a sandbox's request.
//
// The sandbox holds at most a placeholder key (proto.ModelPlaceholderKey);
// credentials it sends are dropped, so a placeholder, or a real key, shown
// to another agent's door is worth nothing there.
//
// Adding a provider kind (one that serves canned turns without a network,
// say) is a file that calls Register from init; see Backend.
package modeldoor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
	"github.com/toolgate/toolgate/internal/proto"
)

// Pattern is the door's route on the agent sockets.
const Pattern = proto.ModelRoute + "{provider}/{path...}"

// Headers on every answer the door itself gives (a refusal, a failure to
// reach the upstream): the audit id of the call and the rule that decided.
const (
	HeaderAuditID = "Toolgate-Audit-Id"
	HeaderRule    = "Toolgate-Rule"
)

// Door serves model requests through a gateway. It holds no configuration:
// the model tool of the snapshot in force has it.
type Door struct {
	gw *gateway.Gateway
}

// New returns the door of gw; mount it on the agent sockets with
// agentsock.Server.Handle(modeldoor.Pattern, door).
func New(gw *gateway.Gateway) *Door { return &Door{gw: gw} }

// Request is one model request from an in-process caller.
type Request struct {
	Agent    string // whose request: decided, budgeted and recorded as that agent's
	Session  string // correlation: recorded with the call
	Parent   string // correlation: the call that caused this one
	Provider string // a name under gateway.models
	Path     string // as the provider's base URL ends it: /v1/messages, /v1/chat/completions …
	Header   http.Header
	Body     []byte
}

// Send sends one model request through the gateway and returns the answer
// as a client of the provider would get it: the upstream's status, headers
// and body (streamed as it arrives, when it is SSE), or the door's own
// refusal in the provider's error shape, with Toolgate-Audit-Id and
// Toolgate-Rule headers. Closing the body before its end is a client that
// went away, recorded as such once the door has read the answer's usage.
// An error is returned only when no answer could be formed at all (ctx
// ended first).
func (d *Door) Send(caller context.Context, r *Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(caller)
	pr, pw := io.Pipe()
	s := &pipeSink{w: pw, ready: make(chan *http.Response, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		d.serve(ctx, &gateway.Call{Agent: r.Agent, Session: r.Session, Parent: r.Parent, Via: "agent"},
			r.Provider, http.MethodPost, r.Path, r.Header, r.Body, s)
		s.start(http.StatusBadGateway, nil) // no-op when the answer started
		pw.Close()
	}()
	select {
	case resp := <-s.ready:
		resp.Body = &pipeBody{PipeReader: pr, cancel: cancel, done: done}
		return resp, nil
	case <-caller.Done():
		// Nobody will read an answer now: the door's writer must not wait
		// for a reader, nor the caller for the door reading on for usage.
		pr.CloseWithError(caller.Err())
		cancel()
		return nil, caller.Err()
	}
}

// ServeHTTP is the agent socket route.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	call := &gateway.Call{Agent: agentsock.Agent(ctx), Via: "model"}
	if p, ok := agentsock.PeerOf(ctx); ok {
		call.Detail = map[string]any{"peer": p}
	}
	// Hints for correlation only; kept when they could be ids.
	if s := r.Header.Get(proto.ModelHeaderSession); proto.ValidCallID(s) {
		call.Session = s
	}
	if p := r.Header.Get(proto.ModelHeaderParent); proto.ValidCallID(p) {
		call.Parent = p
	}
	provider, path := r.PathValue("provider"), "/"+r.PathValue("path")
	out := &httpSink{w: w}
	limit := int64(config0MaxBody)
	api := guessAPI(path)
	if t, ok := d.tool(); ok {
		if a, ok := t.API(provider); ok {
			api = a
		}
		if n, ok := t.MaxBody(call.Agent); ok {
			limit = n
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err == nil && int64(len(body)) > limit {
		// Refused before it became a call: on the record, never forwarded.
		call.Tool, call.Kind = provider, gateway.KindModel
		call.Args = []byte(fmt.Sprintf(`{"provider":%q,"bodyBytes":%d}`, provider, len(body)))
		dec := gateway.Decision{Rule: "model.body", Reason: fmt.Sprintf("the request body is over the agent's limit of %d bytes", limit)}
		if rerr := d.gw.Refuse(call.Agent, call, dec); errors.Is(rerr, gateway.ErrAuditUnavailable) {
			refuse(out, api, http.StatusServiceUnavailable, "", "", rerr.Error())
			return
		}
		refuse(out, api, http.StatusRequestEntityTooLarge, call.ID, dec.Rule, dec.Reason)
		return
	}
	if err != nil {
		refuse(out, api, http.StatusBadRequest, "", "", "reading the request body: "+err.Error())
		return
	}
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	d.serve(ctx, call, provider, r.Method, path, r.Header, body, out)
}

// config0MaxBody bounds the body of a request to an agent that has no
// model section: it is refused anyway, so read little of it.
const config0MaxBody = 1 << 20

func (d *Door) tool() (*Tool, bool) {
	t, ok := d.gw.Snapshot().ByKind[gateway.KindModel].(*Tool)
	return t, ok
}

// serve runs one request through the pipeline and answers through out.
func (d *Door) serve(ctx context.Context, call *gateway.Call, provider, method, path string, h http.Header, body []byte, out sink) {
	api := guessAPI(path)
	if t, ok := d.tool(); ok {
		if a, ok := t.API(provider); ok {
			api = a
		}
	}
	path, query, _ := strings.Cut(path, "?")
	call.Kind, call.Tool = gateway.KindModel, provider
	call.Prepared = &exchange{method: method, path: path, query: query, header: h, body: body}
	res, err := d.gw.Handle(ctx, call, &gateway.Streams{Stdout: out})
	if out.started() {
		return // the upstream's answer went out; its end is in the result entry
	}
	var denied *gateway.DeniedError
	switch {
	case errors.As(err, &denied):
		status := http.StatusForbidden
		if denied.Decision.Rule == model.RuleRPM {
			status = http.StatusTooManyRequests
			if m := call.Model; m != nil && m.Spent != nil && m.Spent.RetryAfter > 0 {
				out.header().Set("Retry-After", strconv.Itoa(int(m.Spent.RetryAfter.Seconds())+1))
			}
		}
		if denied.Decision.Rule == "args.invalid" {
			status = http.StatusBadRequest
		}
		refuse(out, api, status, denied.ID, denied.Decision.Rule, "toolgate denied this request: "+denied.Decision.Reason)
	case errors.Is(err, gateway.ErrAuditUnavailable):
		refuse(out, api, http.StatusServiceUnavailable, call.ID, "", err.Error())
	case err != nil:
		refuse(out, api, http.StatusBadGateway, call.ID, "", "toolgate could not reach the model provider: "+err.Error())
	case res != nil && res.Error != "":
		refuse(out, api, http.StatusBadGateway, call.ID, "", "toolgate: "+res.Error)
	default:
		refuse(out, api, http.StatusBadGateway, call.ID, "", "toolgate: the model provider gave no answer")
	}
}

// guessAPI shapes an error for a provider the door does not know.
func guessAPI(path string) model.API {
	if strings.HasPrefix(path, "/v1/messages") {
		return model.Anthropic
	}
	return model.OpenAI
}

func refuse(out sink, api model.API, status int, id, rule, msg string) {
	h := out.header()
	h.Set("Content-Type", "application/json")
	if id != "" {
		h.Set(HeaderAuditID, id)
	}
	if rule != "" {
		h.Set(HeaderRule, rule)
	}
	out.start(status, h)
	_, _ = out.Write(model.ErrorBody(api, status, msg))
}

// httpSink answers on an HTTP response, flushing every write.
type httpSink struct {
	w       http.ResponseWriter
	h       http.Header
	began   bool
	flusher http.Flusher
}

func (s *httpSink) header() http.Header {
	if s.h == nil {
		s.h = http.Header{}
	}
	return s.h
}

func (s *httpSink) start(status int, h http.Header) {
	if s.began {
		return
	}
	s.began = true
	dst := s.w.Header()
	for k, v := range h {
		dst[k] = v
	}
	for k, v := range s.h {
		dst[k] = v
	}
	s.w.WriteHeader(status)
	s.flusher, _ = s.w.(http.Flusher)
	if s.flusher != nil {
		s.flusher.Flush() // the client sees the status before the first token
	}
}

func (s *httpSink) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err == nil && s.flusher != nil {
		err = http.NewResponseController(s.w).Flush()
	}
	return n, err
}

func (s *httpSink) started() bool { return s.began }

// pipeSink answers an in-process caller through a pipe.
type pipeSink struct {
	w     *io.PipeWriter
	h     http.Header
	once  sync.Once
	began bool
	mu    sync.Mutex
	ready chan *http.Response
}

func (s *pipeSink) header() http.Header {
	if s.h == nil {
		s.h = http.Header{}
	}
	return s.h
}

func (s *pipeSink) start(status int, h http.Header) {
	s.once.Do(func() {
		s.mu.Lock()
		s.began = true
		s.mu.Unlock()
		hdr := http.Header{}
		for k, v := range h {
			hdr[k] = v
		}
		for k, v := range s.h {
			hdr[k] = v
		}
		s.ready <- &http.Response{Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: hdr, ContentLength: -1}
	})
}

func (s *pipeSink) Write(p []byte) (int, error) { return s.w.Write(p) }

func (s *pipeSink) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.began
}

// pipeBody is an in-process answer's body. Closing it after its end waits
// for the call's result to be handed to the audit; closing it early is a
// client that went away: the door reads on for the answer's usage
// (bounded, see Tool.Run) and records the result when it has it, without
// holding the caller.
type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	ended  atomic.Bool
}

func (b *pipeBody) Read(p []byte) (int, error) {
	n, err := b.PipeReader.Read(p)
	if err == io.EOF {
		b.ended.Store(true)
	}
	return n, err
}

func (b *pipeBody) Close() error {
	b.PipeReader.CloseWithError(errClientClosed)
	b.cancel()
	if b.ended.Load() {
		<-b.done
	}
	return nil
}

var errClientClosed = errors.New("the caller closed the answer")
