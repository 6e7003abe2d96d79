// Package hookserver is the host side of toolgate's Claude Code hooks: the
// gate and tap routes on every agent socket, and the admin handler that
// records a stream-json transcript as observations. It lives apart from
// package hooks so the in-sandbox client, which imports hooks, does not
// link an HTTP server.
//
// Wiring (the daemon):
//
//	snap.ByKind = map[gateway.Kind]gateway.Tool{gateway.KindHook: hookcall.Tool()}
//	hs, err := hookserver.New(hookserver.Options{Gateway: gw,
//		AuditDir: cfg.Gateway.Audit.Dir, Logger: log})
//	hs.Mount(agentSrv)                                    // agent sockets
//	mux.Handle("POST /v1/agents/{agent}/observations", admin(hs.Ingest())) // admin API
package hookserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/hookcall"
	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// Defaults of Options.
const (
	// DefaultRecent is how many recorded event ids are remembered for
	// deduplication (per server, all agents).
	DefaultRecent = 1 << 16
	// DefaultDedupWindow is how long a recorded id is remembered across
	// restarts. A spooled event older than this that is delivered again may
	// be recorded twice.
	DefaultDedupWindow = 7 * 24 * time.Hour
)

// Rules of the gate's own refusals (before policy is asked).
const (
	RuleInput = "hook.input" // the hook input could not be read or mapped
)

// Options are the server's collaborators.
type Options struct {
	// Gateway records the gate's calls, the tap's reports and the
	// transcripts' observations (Observe), bounding them like every entry.
	Gateway *gateway.Gateway
	// AuditDir is read at start for event ids already recorded ("" skips
	// it): only the entries after the saved state's position, or, with no
	// usable state, the DedupWindow's worth.
	AuditDir string
	// StatePath is where the dedup state is saved (HOME/hooks-seen.json in
	// the daemon; "" saves none). Position is then required.
	StatePath string
	// Position is the audit log's durable end (audit.Writer.Position): the
	// saved state is complete up to it.
	Position    func() audit.Position
	Logger      *slog.Logger
	Recent      int           // default DefaultRecent
	DedupWindow time.Duration // default DefaultDedupWindow
}

// Server serves the hook routes.
type Server struct {
	opts Options

	mu       sync.Mutex
	seen     *recent                  // per agent, the event ids of recorded tap events and observations
	inflight map[string]chan struct{} // ids being appended right now
	dirty    bool                     // seen changed since the last save

	stop, saved chan struct{} // the save loop's
}

// New returns a server that remembers the tap events and observations
// already recorded, so a redelivery after a restart is still recognised.
// With a StatePath it saves what it remembers there until Close.
func New(opts Options) (*Server, error) {
	if opts.Gateway == nil {
		return nil, errors.New("hookserver: Gateway is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Recent <= 0 {
		opts.Recent = DefaultRecent
	}
	if opts.DedupWindow <= 0 {
		opts.DedupWindow = DefaultDedupWindow
	}
	s := &Server{opts: opts, seen: newRecent(opts.Recent), inflight: map[string]chan struct{}{}}
	if opts.StatePath != "" && opts.Position == nil {
		return nil, errors.New("hookserver: a StatePath needs the audit log's Position")
	}
	if err := s.loadSeen(); err != nil {
		return nil, fmt.Errorf("hookserver: reading recorded event ids: %w", err)
	}
	if opts.StatePath != "" {
		s.stop, s.saved = make(chan struct{}), make(chan struct{})
		go s.saveLoop(s.stop, s.saved)
	}
	return s, nil
}

// Close stops the saving and saves the state a last time; call it once no
// more hook requests are served.
func (s *Server) Close() error {
	if s.stop == nil {
		return nil
	}
	close(s.stop)
	<-s.saved
	s.stop = nil
	return s.save()
}

// recordedID is the dedup id of an entry this package wrote: a tap entry's
// event id, an observation's entry id.
func recordedID(e *gateway.Entry) string {
	switch {
	case e.Type == gateway.KindHook && e.Decision == hookcall.DecisionReported:
		id, _ := e.Detail["event_id"].(string)
		return id
	case e.Type == gateway.KindObserved:
		return e.ID
	}
	return ""
}

func key(agent, id string) string { return agent + "\x00" + id }

// Mount puts the gate and the tap on every agent socket.
func (s *Server) Mount(srv *agentsock.Server) {
	srv.Handle("POST "+proto.PreToolUsePath, http.HandlerFunc(s.preToolUse))
	srv.Handle("POST "+proto.PostToolUsePath, http.HandlerFunc(s.postToolUse))
}

// gateAnswer is the gate route's 200 body for a decision and its audit id.
func gateAnswer(d gateway.Decision, id string) proto.GateAnswer {
	return proto.GateAnswer{Allow: d.Allow, Rule: d.Rule, Reason: d.Reason, Ask: d.Ask, Shadow: d.Shadow, ID: id}
}

// TapAnswer is the tap route's 200 body.
type TapAnswer struct {
	ID        string `json:"id,omitempty"` // audit id of the entry written
	Duplicate bool   `json:"duplicate,omitempty"`
}

func (s *Server) workspace(agent string) string {
	if ws := s.opts.Gateway.Snapshot().Agents[agent].Workspace; ws != "" {
		return ws
	}
	return proto.WorkspacePath
}

// preToolUse is the gate: hook input → hookcall.ToCall → gateway.Handle → the
// decision. Input that cannot be read or mapped is refused and recorded; the
// answer is a decision whenever the audit could record one.
func (s *Server) preToolUse(w http.ResponseWriter, r *http.Request) {
	agent := agentsock.Agent(r.Context())
	in, err := hooks.ParseInput(r.Body, hooks.DefaultMaxInput)
	if err == nil && in.HookEventName != hooks.EventPreToolUse {
		err = fmt.Errorf("the gate takes %s events, got %s", hooks.EventPreToolUse, in.HookEventName)
	}
	var call *gateway.Call
	if err == nil {
		call, err = hookcall.ToCall(in, s.workspace(agent))
	}
	if err != nil {
		s.refuse(w, r, agent, in, err)
		return
	}
	call.Agent = agent
	withPeer(r, call)
	// A call a rule sends to a person waits inside the gate's deadline.
	ctx, cancel := context.WithTimeout(r.Context(), hooks.MaxAskWait)
	defer cancel()
	_, err = s.opts.Gateway.Handle(ctx, call, nil)
	var denied *gateway.DeniedError
	switch {
	case err == nil:
		wire.WriteJSON(w, gateAnswer(gateway.Decision{Allow: true}, call.ID))
	case errors.As(err, &denied):
		wire.WriteJSON(w, gateAnswer(denied.Decision, denied.ID))
	default: // the audit could not record the decision: the client fails closed
		status, e := wire.ErrorFor(err)
		wire.WriteError(w, status, e)
	}
}

// refuse records a gate request whose input was unusable and answers deny.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, agent string, in *hooks.Input, cause error) {
	err := s.opts.Gateway.Refuse(agent, refusal(r, agent, in), gateway.Decision{Rule: RuleInput, Reason: "bad hook input: " + cause.Error()})
	var denied *gateway.DeniedError
	if !errors.As(err, &denied) { // not on record: the client fails closed
		status, e := wire.ErrorFor(err)
		wire.WriteError(w, status, e)
		return
	}
	wire.WriteJSON(w, gateAnswer(denied.Decision, denied.ID))
}

// refusal is the call of a hook request refused before it became one: what
// the input (nil when unreadable) and the socket say of it.
func refusal(r *http.Request, agent string, in *hooks.Input) *gateway.Call {
	call := &gateway.Call{Agent: agent, Kind: gateway.KindHook, Via: hookcall.ViaHook, Detail: map[string]any{}}
	if in != nil {
		call.Tool, call.Session = in.ToolName, in.SessionID
		if in.ToolUseID != "" {
			call.Detail["tool_use_id"] = in.ToolUseID
		}
	}
	withPeer(r, call)
	return call
}

// withPeer records the process on the socket's other end, as every entry
// that came through an agent socket does (docs/protocol.md).
func withPeer(r *http.Request, call *gateway.Call) {
	if p, ok := agentsock.PeerOf(r.Context()); ok {
		if call.Detail == nil {
			call.Detail = map[string]any{}
		}
		call.Detail["peer"] = p
	}
	withRun(r, call)
}

// withRun links a hook call to the run it happened in (the gate and tap
// send the exec call and session they run under, toolgate run's), Claude
// Code's own session id kept in detail.
func withRun(r *http.Request, call *gateway.Call) {
	agentsock.RunHints(r.Header, call, "claude_session_id")
}

// postToolUse is the tap: one audit entry per event id, whatever the number
// of deliveries.
func (s *Server) postToolUse(w http.ResponseWriter, r *http.Request) {
	agent := agentsock.Agent(r.Context())
	in, err := hooks.ParseInput(r.Body, hooks.DefaultMaxInput)
	if err == nil && in.HookEventName != hooks.EventPostToolUse && in.HookEventName != hooks.EventPostToolUseFailure {
		err = fmt.Errorf("the tap takes %s and %s events, got %s", hooks.EventPostToolUse, hooks.EventPostToolUseFailure, in.HookEventName)
	}
	var call *gateway.Call
	if err == nil {
		call, err = hookcall.ToCall(in, s.workspace(agent))
	}
	// A report the tap cannot take is refused on the record, like a gate's.
	switch {
	case errors.Is(err, hooks.ErrTooLarge):
		dec := gateway.Decision{Rule: RuleInput, Reason: "bad hook input: " + err.Error()}
		wire.Refused(w, http.StatusRequestEntityTooLarge, "too_large", s.opts.Gateway.Refuse(agent, refusal(r, agent, in), dec))
		return
	case err != nil:
		dec := gateway.Decision{Rule: RuleInput, Reason: "bad hook input: " + err.Error()}
		wire.Refused(w, http.StatusBadRequest, "bad_request", s.opts.Gateway.Refuse(agent, refusal(r, agent, in), dec))
		return
	}
	if _, ok := s.opts.Gateway.Snapshot().Agents[agent]; !ok {
		dec := gateway.Decision{Rule: "agent.unknown", Reason: fmt.Sprintf("unknown agent %q", agent)}
		wire.Refused(w, http.StatusForbidden, "denied", s.opts.Gateway.Refuse(agent, refusal(r, agent, in), dec))
		return
	}
	withPeer(r, call)
	id, dup, err := s.record(agent, hooks.EventID(in), tapObservation(agent, in, call))
	switch {
	case err != nil:
		wire.WriteError(w, http.StatusServiceUnavailable, &api.Error{Code: "unavailable", Message: err.Error()})
	case dup:
		wire.WriteJSON(w, TapAnswer{Duplicate: true})
	default:
		wire.WriteJSON(w, TapAnswer{ID: id})
	}
}

// tapObservation is what a tap event reports: the finished call, its outcome and details.
func tapObservation(agent string, in *hooks.Input, call *gateway.Call) *gateway.Observation {
	o := &gateway.Observation{
		Agent:   agent,
		Type:    gateway.KindHook,
		Tool:    call.Tool,
		Via:     hookcall.ViaHook,
		Verdict: hookcall.DecisionReported,
		Args:    hooks.AuditArgs(call.Tool, call.Args),
		Session: call.Session,
		Parent:  call.Parent,
		Detail:  make(map[string]any, len(call.Detail)),
	}
	if in.DurationMs != nil {
		ms := *in.DurationMs
		o.DurationMs = &ms
	}
	if in.HookEventName == hooks.EventPostToolUseFailure {
		o.Error, _ = call.Detail["error"].(string)
	}
	for k, v := range call.Detail {
		if k != "error" { // in Error
			o.Detail[k] = v
		}
	}
	return o
}

// record has the gateway record o unless id was already recorded for
// agent, and returns the entry's id. Concurrent deliveries of one id wait
// for the first; only a successful append marks the id, so a failed one can
// be retried.
func (s *Server) record(agent, id string, o *gateway.Observation) (entryID string, dup bool, err error) {
	k := key(agent, id)
	s.mu.Lock()
	for {
		if s.seen.has(agent, id) {
			s.mu.Unlock()
			return "", true, nil
		}
		ch, busy := s.inflight[k]
		if !busy {
			break
		}
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	ch := make(chan struct{})
	s.inflight[k] = ch
	s.mu.Unlock()

	entryID, err = s.opts.Gateway.Observe(o)

	s.mu.Lock()
	delete(s.inflight, k)
	if err == nil {
		s.seen.add(agent, id, time.Now().Unix())
		s.dirty = true
	}
	s.mu.Unlock()
	close(ch)
	return entryID, false, err
}

// Ingest is the admin handler for POST /v1/agents/{agent}/observations:
// the body is a stream-json transcript (claude -p --output-format
// stream-json --verbose); every observation becomes an entry of type
// observed, once per observation id. The answer is IngestAnswer; a
// malformed line is 400 with its line number, after the lines before it
// were recorded (so a retry of the fixed file records only the rest).
func (s *Server) Ingest() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent := r.PathValue("agent")
		if _, ok := s.opts.Gateway.Snapshot().Agents[agent]; !ok {
			wire.WriteError(w, http.StatusNotFound, &api.Error{Code: "not_found", Message: fmt.Sprintf("unknown agent %q", agent)})
			return
		}
		ans, err := s.IngestStream(agent, r.Body)
		if err != nil {
			status := http.StatusBadRequest
			if errors.Is(err, errAudit) {
				status = http.StatusServiceUnavailable
			}
			wire.WriteError(w, status, &api.Error{Code: http.StatusText(status), Message: err.Error()})
			return
		}
		wire.WriteJSON(w, ans)
	})
}

// IngestAnswer counts what one ingestion did.
type IngestAnswer struct {
	Recorded   int `json:"recorded"`
	Duplicates int `json:"duplicates"`
}

var errAudit = errors.New("audit log unavailable")

// IngestStream records the observations of a transcript for agent.
func (s *Server) IngestStream(agent string, r io.Reader) (IngestAnswer, error) {
	var ans IngestAnswer
	err := hookcall.ReadStreamJSON(r, func(o hookcall.Observation) error {
		_, dup, err := s.record(agent, o.ID, o.Observed(agent))
		switch {
		case err != nil:
			return fmt.Errorf("%w: %v", errAudit, err)
		case dup:
			ans.Duplicates++
		default:
			ans.Recorded++
		}
		return nil
	})
	return ans, err
}
