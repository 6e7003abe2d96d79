// Package adminapi is the gateway's admin HTTP API, served on a Unix socket
// in the toolgate home and optionally on loopback TCP; its client, which the
// CLI uses, is internal/cli/adminclient. Every tool call it carries goes through
// the pipeline.
package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/connlimit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox/lifecycle"
	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// DefaultMaxBody bounds a request body: a write of the largest allowed file,
// JSON-escaped, fits.
const DefaultMaxBody = 160 << 20

// Server serves the admin API.
type Server struct {
	Gateway *gateway.Gateway
	Tokens  *auth.Store
	// Status reports the agents' sandboxes.
	Status func(ctx context.Context) ([]api.AgentStatus, error)
	// Explain runs policy without executing, for `policy eval` against the live config.
	Explain func(call *gateway.Call) any
	// Observations records a stream-json transcript for an agent as
	// observed entries (toolgate ingest).
	Observations http.Handler
	// Sessions runs toolgate's own agent loop (toolgate agent): POST a
	// task, get the session's events as NDJSON.
	Sessions http.Handler
	// Approvals holds the calls waiting for a person (toolgate approvals).
	Approvals *approval.Store
	// Audit answers audit show and query, and rebuilds the index.
	Audit AuditIndex
	// Checkpoint signs a checkpoint of the audit log now, for a receipt
	// of entries just written; Identity names the keys it is checked
	// with. Nil: the routes are not served.
	Checkpoint func() ([]byte, error)
	Identity   func() api.Identity
	MaxBody    int64
	// Tasks opens the budget of a run's session for as long as its call
	// runs (toolgate run --budget, or the agent's session.budget); nil:
	// runs have no budgets.
	Tasks interface {
		Open(agent, session, spec string) (close func(), err error)
	}
	// Labels shows and clears agents' session labels; nil: not served.
	Labels Labels
	// Sandboxes lists, stops and removes the sandboxes, each action
	// recorded as asked by by; nil: not served.
	Sandboxes func(by string) *lifecycle.Ops
}

// Handler returns the routes, each behind the admin token.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, map[string]string{"status": "ok"})
	})
	mux.Handle("POST /v1/agents/{agent}/tools/{tool}/call", s.admin(s.call))
	mux.Handle("GET /v1/agents", s.admin(s.agents))
	mux.Handle("POST /v1/policy/eval", s.admin(s.eval))
	if s.Approvals != nil {
		mux.Handle("GET /v1/approvals", s.admin(s.listApprovals))
		mux.Handle("GET /v1/approvals/{id}", s.admin(s.getApproval))
		mux.Handle("POST /v1/approvals/{id}", s.admin(s.answerApproval))
		mux.HandleFunc("GET "+approval.LinkPath+"{token}", s.linkPage)
		mux.HandleFunc("POST "+approval.LinkPath+"{token}", s.answerLink)
	}
	if s.Labels != nil {
		mux.Handle("GET /v1/agents/{agent}/labels", s.admin(s.listLabels))
		mux.Handle("POST /v1/agents/{agent}/labels/clear", s.admin(s.clearLabels))
	}
	if s.Sandboxes != nil {
		mux.Handle("GET /v1/sandboxes", s.admin(s.listSandboxes))
		mux.Handle("POST /v1/sandboxes/prune", s.admin(s.pruneSandboxes))
		mux.Handle("POST /v1/agents/{agent}/sandbox/{action}", s.admin(s.actOnSandbox))
	}
	if s.Audit != nil {
		mux.Handle("GET /v1/audit/entries", s.admin(s.auditEntries))
		mux.Handle("POST /v1/audit/reindex", s.admin(s.auditReindex))
	}
	if s.Sessions != nil {
		mux.Handle("POST /v1/agents/{agent}/sessions", s.admin(s.Sessions.ServeHTTP))
	}
	if s.Observations != nil {
		mux.Handle("POST /v1/agents/{agent}/observations", s.admin(s.Observations.ServeHTTP))
	}
	if s.Checkpoint != nil {
		mux.Handle("POST /v1/audit/checkpoint", s.admin(func(w http.ResponseWriter, r *http.Request) {
			cp, err := s.Checkpoint()
			if err != nil {
				wire.WriteError(w, http.StatusServiceUnavailable, &api.Error{Code: "unavailable", Message: "signing a checkpoint: " + err.Error()})
				return
			}
			wire.WriteJSON(w, api.Checkpointed{Checkpoint: string(cp)})
		}))
	}
	if s.Identity != nil {
		mux.Handle("GET /v1/identity", s.admin(func(w http.ResponseWriter, r *http.Request) { wire.WriteJSON(w, s.Identity()) }))
	}
	return mux
}

// admin wraps a route with admin-token authentication.
func (s *Server) admin(next http.HandlerFunc) http.Handler {
	return auth.Require(s.Tokens, auth.ScopeAdmin, auth.RequireOptions{OnRefuse: s.RecordRefusal})(next)
}

// RecordRefusal audits a request refused for its token as a denied attempt
// with no agent.
func (s *Server) RecordRefusal(r *http.Request, reason string) {
	s.recordRefusal(r, reason, gateway.ViaAdmin)
}

// RefusalsVia records refusals like RecordRefusal for another route on the
// host listeners (MCP, the dashboard), under its own entry point.
func (s *Server) RefusalsVia(via string) func(r *http.Request, reason string) {
	return func(r *http.Request, reason string) { s.recordRefusal(r, reason, via) }
}

func (s *Server) recordRefusal(r *http.Request, reason, via string) {
	call := &gateway.Call{Kind: gateway.KindAdmin, Tool: r.Method + " " + r.URL.Path, Via: via,
		Detail: map[string]any{"remote": r.RemoteAddr}}
	err := s.Gateway.Refuse(remoteHost(r), call, gateway.Decision{Rule: "auth.token", Reason: reason})
	if errors.Is(err, gateway.ErrAuditUnavailable) {
		slog.Error("auditing a refused request failed", "route", call.Tool, "err", err)
	}
}

// remoteHost is who a refusal is counted against: the source of a TCP
// request (connlimit.Source: this host's users together, a remote host by
// its address, whatever port or loopback address it uses), the socket
// otherwise.
func remoteHost(r *http.Request) string {
	if _, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return connlimit.SourceOf(r.RemoteAddr)
	}
	return "admin.sock"
}

func (s *Server) call(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Content-Type") == api.MediaRaw {
		s.rawCall(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody()))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			wire.WriteError(w, http.StatusRequestEntityTooLarge, &api.Error{Code: "too_large",
				Message: fmt.Sprintf("request body over the limit of %d bytes", tooBig.Limit)})
			return
		}
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: err.Error()})
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		body = []byte("{}")
	}
	call := &gateway.Call{
		Agent:   r.PathValue("agent"),
		Tool:    r.PathValue("tool"),
		Args:    body,
		Session: r.Header.Get("Toolgate-Session"),
		Via:     gateway.ViaAdmin,
	}
	end, ok := s.openTask(w, r, call)
	if !ok {
		return
	}
	defer end()
	switch r.Header.Get("Accept") {
	case api.MediaRaw:
		s.rawAnswer(w, r, call, nil)
	case api.MediaNDJSON:
		s.streamed(w, r, call, nil)
	default:
		s.answer(w, r, call, nil)
	}
}

// openTask opens the budget of the run a call with a session starts
// (proto.HeaderBudget, else the agent's session.budget); end closes it.
func (s *Server) openTask(w http.ResponseWriter, r *http.Request, call *gateway.Call) (end func(), ok bool) {
	spec := r.Header.Get(proto.HeaderBudget)
	switch {
	case s.Tasks == nil || (call.Session == "" && spec == ""):
		return func() {}, true
	case call.Session == "":
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: "a budget is a run's: give the call a session (toolgate run does)"})
		return nil, false
	}
	end, err := s.Tasks.Open(call.Agent, call.Session, spec)
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: err.Error()})
		return nil, false
	}
	return end, true
}

// streamed answers with output frames as they are produced, then the
// result. The decision is known before any output, so denials still get a
// proper status. stdin, when the body is the call's input, is read while
// output is written.
func (s *Server) streamed(w http.ResponseWriter, r *http.Request, call *gateway.Call, stdin io.Reader) {
	if stdin != nil {
		// Else, for a client that keeps its connection open, Go's server
		// reads and drops up to 256 KiB of the unread body as the first
		// frame goes out: the command would lose that much of its input.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	out := wire.NewLazy(w, call, nil)
	res, err := s.Gateway.Handle(r.Context(), call, out.Streams(stdin))
	out.Finish(res, err)
}

// rawCall is a call whose arguments are in the api.ArgsHeader and whose body is
// the call's input as bytes (a write's content, an exec's stdin): it streams
// to the tool, never held or encoded as JSON. The tool bounds it (a write
// states its size, at most limits.maxWrite).
func (s *Server) rawCall(w http.ResponseWriter, r *http.Request) {
	args := []byte(strings.TrimSpace(r.Header.Get(api.ArgsHeader)))
	if len(args) == 0 {
		args = []byte("{}")
	}
	call := &gateway.Call{
		Agent:   r.PathValue("agent"),
		Tool:    r.PathValue("tool"),
		Args:    args,
		Session: r.Header.Get("Toolgate-Session"),
		Via:     gateway.ViaAdmin,
	}
	end, ok := s.openTask(w, r, call)
	if !ok {
		return
	}
	defer end()
	switch r.Header.Get("Accept") {
	case api.MediaRaw:
		s.rawAnswer(w, r, call, r.Body)
	case api.MediaNDJSON:
		s.streamed(w, r, call, r.Body)
	default:
		s.answer(w, r, call, &gateway.Streams{Stdin: r.Body})
	}
}

// rawAnswer runs a call whose output is bytes (a read with encoding raw):
// they are the response body as the tool writes them, and the outcome
// follows in the api.ResultTrailer, {"result":…} or {"error":…}. A call that
// fails before its first byte is answered as any other, with its status.
func (s *Server) rawAnswer(w http.ResponseWriter, r *http.Request, call *gateway.Call, stdin io.Reader) {
	out := &rawBody{w: w, call: call}
	res, err := s.Gateway.Handle(r.Context(), call, &gateway.Streams{Stdin: stdin, Stdout: out})
	if !out.started {
		if err != nil {
			status, e := wire.ErrorFor(err)
			if e.ID == "" {
				e.ID = call.ID
			}
			wire.WriteError(w, status, e)
			return
		}
		out.start()
	}
	var outcome struct {
		Result *gateway.Result `json:"result,omitempty"`
		Error  *api.Error      `json:"error,omitempty"`
	}
	if err != nil {
		_, outcome.Error = wire.ErrorFor(err)
		if outcome.Error.ID == "" {
			outcome.Error.ID = call.ID
		}
	} else {
		outcome.Result = res
	}
	b, _ := json.Marshal(outcome)
	w.Header().Set(api.ResultTrailer, string(b))
}

// rawBody sends the status and headers with the first byte.
type rawBody struct {
	w       http.ResponseWriter
	call    *gateway.Call
	started bool
}

func (b *rawBody) start() {
	b.started = true
	h := b.w.Header()
	h.Set("Content-Type", api.MediaRaw)
	h.Set("Toolgate-Call-Id", b.call.ID)
	h.Set("Trailer", api.ResultTrailer)
	b.w.WriteHeader(http.StatusOK)
}

func (b *rawBody) Write(p []byte) (int, error) {
	if !b.started {
		b.start()
	}
	return b.w.Write(p)
}

// answer runs a call and writes its result, or its error, as one JSON body.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, call *gateway.Call, streams *gateway.Streams) {
	res, err := s.Gateway.Handle(r.Context(), call, streams)
	if err != nil {
		status, e := wire.ErrorFor(err)
		if e.ID == "" {
			e.ID = call.ID
		}
		wire.WriteError(w, status, e)
		return
	}
	w.Header().Set("Toolgate-Call-Id", call.ID)
	wire.WriteJSON(w, res)
}

func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	rows, err := s.Status(r.Context())
	if err != nil {
		wire.WriteError(w, http.StatusBadGateway, &api.Error{Code: "sandbox", Message: err.Error()})
		return
	}
	for i := range rows {
		st := s.Gateway.Stats(rows[i].Agent)
		rows[i].Calls, rows[i].Denials = st.Calls.Load(), st.Denials.Load()
	}
	wire.WriteJSON(w, rows)
}

func (s *Server) eval(w http.ResponseWriter, r *http.Request) {
	var req api.EvalRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: "malformed JSON: " + err.Error()})
		return
	}
	call := &gateway.Call{Agent: req.Agent, Tool: req.Tool, Args: req.Args, Via: gateway.ViaAdmin}
	wire.WriteJSON(w, s.Explain(call))
}

func (s *Server) maxBody() int64 {
	if s.MaxBody > 0 {
		return s.MaxBody
	}
	return DefaultMaxBody
}
