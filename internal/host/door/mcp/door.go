// Package mcp is the gateway's MCP front door (streamable HTTP, official Go
// SDK): an agent's tools — its enabled core tools and allowed plugin tools,
// upstream MCP servers' among them — as MCP tools, every call through
// gateway.Handle with Via "mcp"; and skills as MCP resources.
//
// The door does not authenticate. The mount point says who is calling
// (IdentifyFunc): on the host listener that is the bearer token auth.Require
// admitted; on an agent's socket, the socket itself.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// Via is the entry point recorded in the audit log for calls through the door.
const Via = "mcp"

// Defaults for the zero Options.
const (
	DefaultMaxBatch       = 64
	DefaultMaxBody        = 96 << 20 // a write of the largest allowed file, JSON-escaped, with room
	DefaultPollEvery      = time.Second
	DefaultSessionTimeout = 30 * time.Minute
)

// Identity is who a request to the door speaks for.
type Identity struct {
	// Agent is the agent acted for; empty only for a skills-only identity
	// that is bound to no agent (it sees the global skills).
	Agent string
	// SkillsOnly identities get the skills resources and no tools.
	SkillsOnly bool
}

// IdentifyFunc tells the door who sent a request; false refuses it (401).
type IdentifyFunc func(r *http.Request) (Identity, bool)

// TokenIdentity identifies a request by the token auth.Require admitted it
// with: an mcp token acts for its agent, a skills token reads skills only.
func TokenIdentity(r *http.Request) (Identity, bool) {
	t, ok := auth.TokenFrom(r.Context())
	if !ok {
		return Identity{}, false
	}
	switch t.Scope {
	case auth.ScopeMCP:
		return Identity{Agent: t.Agent}, t.Agent != ""
	case auth.ScopeSkills:
		return Identity{Agent: t.Agent, SkillsOnly: true}, true
	}
	return Identity{}, false
}

// AgentIdentity adapts an agent lookup (e.g. the agent socket's) to an
// IdentifyFunc with full access for that agent.
func AgentIdentity(agent func(r *http.Request) (string, bool)) IdentifyFunc {
	return func(r *http.Request) (Identity, bool) {
		a, ok := agent(r)
		return Identity{Agent: a}, ok && a != ""
	}
}

// RouteOptions is how the host listener mounts the door: the route requires
// an mcp token and, by opting in, takes a skills token for resource requests.
func RouteOptions(onRefuse func(r *http.Request, reason string)) auth.RequireOptions {
	return auth.RequireOptions{
		Also:     map[auth.Scope]func(*http.Request) bool{auth.ScopeSkills: ResourcesOnly},
		OnRefuse: onRefuse,
	}
}

// Options configure a Door.
type Options struct {
	// Home is the toolgate home: skills live in HOME/skills/NAME/SKILL.md and
	// HOME/agents/AGENT/skills/NAME/SKILL.md. Empty serves no skills.
	Home string
	// Visible returns the tools an agent may see (its enabled core tools and
	// its plugin allowlist). Listing is a convenience: every call is still
	// decided by policy. Nil shows every tool of the snapshot.
	Visible func(agent string) []string
	// Version is reported to clients.
	Version string
	Logger  *slog.Logger
	// MaxBatch bounds the requests in one JSON-RPC batch (older protocol
	// versions allow batches; a huge one must not fan out into huge work).
	MaxBatch int
	// MaxBody bounds a request body.
	MaxBody int64
	// PollEvery is how often the skills directories and the configuration
	// are checked for changes, which clients are then notified of.
	PollEvery time.Duration
	// SessionTimeout closes sessions idle this long.
	SessionTimeout time.Duration
	// MaxSessions caps the sessions of one identity; a new one over the cap
	// closes the one idle longest (DefaultMaxSessions).
	MaxSessions int
	// Generation moves whenever a tool may have been withheld or released
	// (the upstream pin store's), so the next request re-checks at once;
	// nil leaves that to the poll.
	Generation func() uint64
}

// Door serves MCP for any number of identities. Each identity gets its own
// MCP server (its tools, its skills) and its own session table, so a session
// id never crosses from one agent to another.
type Door struct {
	gw     *gateway.Gateway
	opts   Options
	log    *slog.Logger
	skills *skillSet

	mu    sync.Mutex
	doors map[Identity]*identityDoor

	stop chan struct{}
	done chan struct{}
}

// identityDoor is one identity's server and session table.
type identityDoor struct {
	id       Identity
	server   *sdk.Server
	handler  *sdk.StreamableHTTPHandler
	sessions *sessionTable

	mu    sync.Mutex
	snap  *gateway.Snapshot       // tools last synced from
	gen   uint64                  // Options.Generation when last synced
	tools map[string]string       // name → definition digest, as registered
	res   map[string]*skillRecord // uri → skill, as registered
}

// New returns a door on the gateway and starts watching for changes.
func New(gw *gateway.Gateway, opts Options) *Door {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.PollEvery <= 0 {
		opts.PollEvery = DefaultPollEvery
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Door{gw: gw, opts: opts, log: log, skills: newSkillSet(opts.Home, log),
		doors: map[Identity]*identityDoor{}, stop: make(chan struct{}), done: make(chan struct{})}
	d.skills.scan()
	go d.watch()
	return d
}

// Close stops watching. Sessions end with their HTTP server.
func (d *Door) Close() error {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	<-d.done
	return nil
}

// Handler serves the door for the identities id admits.
func (d *Door) Handler(id IdentifyFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ident, ok := id(r)
		if !ok {
			wire.WriteError(w, http.StatusUnauthorized, &api.Error{Code: "unauthorized", Message: "no identity for this request"})
			return
		}
		snap := d.gw.Snapshot()
		if ident.Agent != "" {
			if _, known := snap.Agents[ident.Agent]; !known {
				wire.WriteError(w, http.StatusForbidden, &api.Error{Code: "unauthorized", Message: fmt.Sprintf("agent %q is not configured", ident.Agent)})
				return
			}
		}
		if r.Method == http.MethodPost && !d.checkBody(w, r) {
			return
		}
		idd := d.door(ident)
		if !ident.SkillsOnly {
			d.syncTools(idd, snap, false)
		}
		idd.serve(w, r)
	})
}

// checkBody bounds the body and refuses oversized batches before the SDK
// sees them. It leaves the body readable again.
func (d *Door) checkBody(w http.ResponseWriter, r *http.Request) bool {
	body, err := readBody(w, r, d.opts.MaxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("request body over the limit of %d bytes", tooBig.Limit), http.StatusRequestEntityTooLarge)
			return false
		}
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	if n := batchLen(body); n > d.opts.MaxBatch {
		writeRPCError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("batch of %d requests is over the limit of %d", n, d.opts.MaxBatch))
		return false
	}
	return true
}

// readBody reads r's body (at most limit bytes) and puts it back.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if br, ok := r.Body.(*bodyReader); ok {
		// Already read by an earlier layer (ResourcesOnly).
		r.Body = &bodyReader{bytes.NewReader(br.b), br.b}
		return br.b, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return nil, err
	}
	r.Body = &bodyReader{bytes.NewReader(b), b}
	return b, nil
}

// bodyReader is a body already read into memory, kept so a later layer can
// look at it again without a copy of the read.
type bodyReader struct {
	*bytes.Reader
	b []byte
}

func (*bodyReader) Close() error { return nil }

// batchLen is the number of messages in a JSON-RPC batch, 0 for anything
// that is not a JSON array (the SDK answers malformed bodies itself).
func batchLen(body []byte) int {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '[' {
		return 0
	}
	var msgs []json.RawMessage
	if json.Unmarshal(body, &msgs) != nil {
		return 0
	}
	return len(msgs)
}

func writeRPCError(w http.ResponseWriter, status int, code int64, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg}})
}

// resourceMethods are what a skills-only identity may send.
var resourceMethods = map[string]bool{
	"initialize": true, "ping": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// ResourcesOnly admits a request that only reads resources (or manages the
// session): the predicate under which the MCP route takes a skills token.
// Anything else — a tool call, a body that cannot be read as JSON-RPC — is
// refused, so the token gets its 401.
func ResourcesOnly(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodDelete:
		return true // the session's event stream and its end
	case http.MethodPost:
	default:
		return false
	}
	body, err := readBody(nil, r, 1<<20)
	if err != nil {
		return false
	}
	ms, ok := methods(body)
	if !ok {
		return false
	}
	for _, m := range ms {
		if !resourceMethods[m] && !isNotification(m) {
			return false
		}
	}
	return true
}

// methods returns the method of every message in a JSON-RPC body (a
// message without one, a response, yields none). It refuses anything a
// different JSON decoder could read differently: a "method" key in another
// case, a duplicate key, trailing data.
func methods(body []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, false
	}
	var out []string
	one := func() bool {
		keys := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return false
			}
			key, _ := k.(string)
			if keys[key] || (strings.EqualFold(key, "method") && key != "method") {
				return false
			}
			keys[key] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return false
			}
			if key == "method" {
				var m string
				if json.Unmarshal(v, &m) != nil {
					return false
				}
				out = append(out, m)
			}
		}
		end, err := dec.Token()
		return err == nil && end == json.Delim('}')
	}
	switch tok {
	case json.Delim('{'):
		if !one() {
			return nil, false
		}
	case json.Delim('['):
		for dec.More() {
			if t, err := dec.Token(); err != nil || t != json.Delim('{') || !one() {
				return nil, false
			}
		}
		if end, err := dec.Token(); err != nil || end != json.Delim(']') {
			return nil, false
		}
	default:
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return out, true
}

func isNotification(method string) bool {
	const p = "notifications/"
	return len(method) > len(p) && method[:len(p)] == p
}

// door returns the identity's server, creating it on first use.
func (d *Door) door(id Identity) *identityDoor {
	d.mu.Lock()
	defer d.mu.Unlock()
	if idd, ok := d.doors[id]; ok {
		return idd
	}
	caps := &sdk.ServerCapabilities{Resources: &sdk.ResourceCapabilities{ListChanged: true, Subscribe: true}}
	if !id.SkillsOnly {
		caps.Tools = &sdk.ToolCapabilities{ListChanged: true}
	}
	idd := &identityDoor{id: id, sessions: newSessionTable(d.opts.MaxSessions),
		tools: map[string]string{}, res: map[string]*skillRecord{}}
	server := sdk.NewServer(&sdk.Implementation{Name: "toolgate", Version: d.opts.Version}, &sdk.ServerOptions{
		Capabilities: caps,
		Instructions: "toolgate: every tool call is decided by policy and audited. Skills are resources skill://global/NAME and skill://AGENT/NAME.",
		// Subscriptions are tracked by the SDK; ResourceUpdated reaches subscribers.
		SubscribeHandler:   idd.subscribe,
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	server.AddReceivingMiddleware(checkResourceURIs, d.refuseUnoffered(idd))
	idd.server = server
	idd.handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server },
		&sdk.StreamableHTTPOptions{SessionTimeout: d.opts.SessionTimeout, MaxRequestBodyBytes: d.opts.MaxBody})
	d.syncSkills(idd, d.skills.current())
	d.doors[id] = idd
	return idd
}

// watch polls for skill changes and configuration swaps, and brings every
// identity's server up to date, which notifies its sessions.
func (d *Door) watch() {
	defer close(d.done)
	t := time.NewTicker(d.opts.PollEvery)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		changed := d.skills.scan()
		snap := d.gw.Snapshot()
		d.mu.Lock()
		doors := make([]*identityDoor, 0, len(d.doors))
		for _, idd := range d.doors {
			doors = append(doors, idd)
		}
		d.mu.Unlock()
		cur := d.skills.current()
		for _, idd := range doors {
			if !idd.id.SkillsOnly {
				d.syncTools(idd, snap, true) // also notices tools withheld or released since
			}
			d.syncSkills(idd, cur)
			for _, r := range changed {
				if idd.sees(r) {
					_ = idd.server.ResourceUpdated(context.Background(), &sdk.ResourceUpdatedNotificationParams{URI: r.URI})
				}
			}
		}
	}
}

// Withholder is a tool that may be unavailable for a while (an upstream
// tool whose definition changed); it is not listed while Withheld errs.
type Withholder interface{ Withheld() error }

// syncTools registers exactly the tools the identity may see in snap. It is
// a no-op for a snapshot already synced unless force is set.
func (d *Door) syncTools(idd *identityDoor, snap *gateway.Snapshot, force bool) {
	idd.mu.Lock()
	defer idd.mu.Unlock()
	var gen uint64
	if d.opts.Generation != nil {
		gen = d.opts.Generation()
	}
	if idd.snap == snap && idd.gen == gen && !force {
		return
	}
	idd.snap, idd.gen = snap, gen
	all := snap.Tools
	if d.opts.Visible != nil {
		all = visibleTools(snap, d.opts.Visible(idd.id.Agent))
	}
	want := notWithheld(all)
	var gone []string
	for name := range idd.tools {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(idd.tools, name)
		}
	}
	if len(gone) > 0 {
		idd.server.RemoveTools(gone...)
	}
	for name, t := range want {
		def, digest, err := toolDef(name, t)
		if err != nil {
			d.log.Warn("tool not offered over MCP", "tool", name, "err", err)
			continue
		}
		if idd.tools[name] == digest {
			continue
		}
		idd.tools[name] = digest
		idd.server.AddTool(def, d.callTool(idd.id.Agent))
	}
}

// callTool is the one tool handler: the call goes through the pipeline, and
// whatever the pipeline says — denial, bad arguments, tool failure — comes
// back as a tool result with IsError, never as a protocol error.
func (d *Door) callTool(agent string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := req.Params.Arguments
		if len(bytes.TrimSpace(args)) == 0 {
			args = json.RawMessage("{}")
		}
		call := &gateway.Call{Agent: agent, Tool: req.Params.Name, Args: args, Via: Via}
		correlate(call, req)
		res, err := d.gw.Handle(ctx, call, nil)
		return toResult(call, res, err), nil
	}
}

// MetaToolUseID is where Claude Code names, in a tools/call's _meta, the
// model's tool_use id the call carries out.
const MetaToolUseID = "claudecode/toolUseId"

// DetailSession is the detail key of the MCP session of a call linked to
// a run's session instead.
const DetailSession = "mcp_session_id"

// correlate sets the hints that place a call in its session's tree: the
// MCP session; or, when the client runs under toolgate run (the in-sandbox
// bridge sends the run's exec and session, agentsock.RunHints), the run's
// session and its exec as parent, the MCP session kept in detail; and the
// model's tool_use id the client names, which puts the call under the
// model call that asked for it (internal/host/calltree).
func correlate(call *gateway.Call, req *sdk.CallToolRequest) {
	if req.Session != nil {
		call.Session = req.Session.ID()
	}
	if req.Extra != nil {
		agentsock.RunHints(req.Extra.Header, call, DetailSession)
	}
	if id, ok := req.Params.Meta[MetaToolUseID].(string); ok && proto.ValidCallID(id) {
		call.Detail = maps.Clone(call.Detail)
		if call.Detail == nil {
			call.Detail = map[string]any{}
		}
		call.Detail[gateway.DetailToolUseID] = id
	}
}

// refuseUnoffered puts a tools/call of a tool this identity is not offered
// on the record as a denial, as the other doors record a call policy
// refuses, instead of letting the SDK answer "unknown tool" unrecorded.
// The call never reaches the pipeline's execution.
func (d *Door) refuseUnoffered(idd *identityDoor) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			r, ok := req.(*sdk.CallToolRequest)
			if !ok || r.Params == nil {
				return next(ctx, method, req)
			}
			idd.mu.Lock()
			_, offered := idd.tools[r.Params.Name]
			idd.mu.Unlock()
			if offered {
				return next(ctx, method, req)
			}
			call := &gateway.Call{Agent: idd.id.Agent, Kind: gateway.KindTool, Tool: r.Params.Name, Args: r.Params.Arguments, Via: Via}
			if t, ok := d.gw.Snapshot().Tools[r.Params.Name]; ok {
				call.Kind = t.Kind()
			}
			correlate(call, r)
			reason := fmt.Sprintf("tool %q is not offered to this identity over MCP", r.Params.Name)
			err := d.gw.Refuse(idd.id.Agent, call, gateway.Decision{Rule: "mcp.unoffered", Reason: reason})
			return toResult(call, nil, err), nil
		}
	}
}

// callError is the structured content of a failed call.
type callError struct {
	Error *api.Error `json:"error"`
}

// ToResult is what a caller of a tool gets back over MCP: whatever the
// pipeline said — denial, bad arguments, tool failure — as a tool result
// with IsError. toolgate's own agent loop gives its model the same.
func ToResult(call *gateway.Call, res *gateway.Result, err error) *sdk.CallToolResult {
	return toResult(call, res, err)
}

func toResult(call *gateway.Call, res *gateway.Result, err error) *sdk.CallToolResult {
	if err != nil {
		_, we := wire.ErrorFor(err)
		if we.ID == "" {
			we.ID = call.ID
		}
		var denied *gateway.DeniedError
		text := err.Error()
		if errors.As(err, &denied) {
			text = fmt.Sprintf("denied by %s: %s (call %s)", denied.Decision.Rule, denied.Decision.Reason, denied.ID)
		}
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}},
			StructuredContent: callError{we}}
	}
	if res == nil {
		res = &gateway.Result{}
	}
	out := &sdk.CallToolResult{IsError: res.Error != ""}
	switch o := res.Output.(type) {
	case nil:
		if res.Error != "" {
			out.Content = []sdk.Content{&sdk.TextContent{Text: res.Error}}
		} else {
			b, _ := json.Marshal(res)
			out.Content = []sdk.Content{&sdk.TextContent{Text: string(b)}}
		}
	case string:
		text := o
		if res.Error != "" {
			text = res.Error + "\n" + o
		}
		out.Content = []sdk.Content{&sdk.TextContent{Text: text}}
	default:
		b, merr := json.Marshal(res)
		if merr != nil {
			b = []byte(fmt.Sprintf("%v", o))
		}
		out.Content = []sdk.Content{&sdk.TextContent{Text: string(b)}}
		out.StructuredContent = res
	}
	return out
}
