package mcp

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Session bounds for the zero Options. One agent has one or two MCP clients;
// the cap is there so that `initialize` in a loop cannot hold the gateway's
// memory (each session keeps its initialize parameters and goroutines until
// it idles out), not to ration honest clients.
const (
	DefaultMaxSessions = 32
	// maxInitializeBody bounds an initialize request, whose parameters the
	// SDK keeps for the session's lifetime.
	maxInitializeBody = 64 << 10
)

// sessionHeader names a request's session (the streamable HTTP transport's).
const sessionHeader = "Mcp-Session-Id"

// sessionTable caps one identity's sessions. The SDK keeps the sessions;
// the table watches the requests to them — which are in use, which have
// been idle longest — and, when a new session would go over the cap, closes
// the idlest one. A session with a request in flight (a call, the event
// stream of GET) is never closed for a new one: with all of them in use,
// the new session is refused instead.
type sessionTable struct {
	max int

	mu      sync.Mutex
	use     map[string]*sessionUse // by session id
	pending int                    // sessions being created
}

type sessionUse struct {
	inFlight int
	last     time.Time
}

func newSessionTable(max int) *sessionTable {
	return &sessionTable{max: max, use: map[string]*sessionUse{}}
}

// reserve makes room for one new session of server, closing idle sessions
// as needed; false means every session is in use.
func (t *sessionTable) reserve(server *sdk.Server) bool {
	var evict []*sdk.ServerSession
	defer func() {
		for _, ss := range evict {
			_ = ss.Close() // outside t.mu: closing calls back into the SDK's tables
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	// Listed under t.mu: a session registered after the listing would
	// otherwise be forgotten below, and never be closed for a new one.
	open := map[string]*sdk.ServerSession{}
	for ss := range server.Sessions() {
		open[ss.ID()] = ss
	}
	for id := range t.use {
		if open[id] == nil { // ended by its client, its idle timeout, or a failed initialize
			delete(t.use, id)
		}
	}
	// Every session the SDK holds is in t.use but those being created,
	// which t.pending counts.
	for len(t.use)+t.pending >= t.max {
		victim := ""
		for id, u := range t.use {
			if u.inFlight == 0 && (victim == "" || u.last.Before(t.use[victim].last)) {
				victim = id
			}
		}
		if victim == "" {
			return false
		}
		evict = append(evict, open[victim])
		delete(t.use, victim)
	}
	t.pending++
	return true
}

// created ends a reservation; id is the session the SDK made, if any.
func (t *sessionTable) created(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending--
	if id != "" {
		t.use[id] = &sessionUse{last: time.Now()}
	}
}

// begin and end bracket a request to session id.
func (t *sessionTable) begin(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if u := t.use[id]; u != nil {
		u.inFlight++
		u.last = time.Now()
	}
}

func (t *sessionTable) end(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if u := t.use[id]; u != nil {
		u.inFlight--
		u.last = time.Now()
	}
}

// serve passes r to the identity's SDK handler within the session cap.
func (idd *identityDoor) serve(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get(sessionHeader); id != "" {
		idd.sessions.begin(id)
		defer idd.sessions.end(id)
		idd.handler.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost { // the SDK refuses it; no session is made
		idd.handler.ServeHTTP(w, r)
		return
	}
	if br, ok := r.Body.(*bodyReader); ok && len(br.b) > maxInitializeBody {
		http.Error(w, fmt.Sprintf("a request starting a session (initialize) is over the limit of %d bytes", maxInitializeBody),
			http.StatusRequestEntityTooLarge)
		return
	}
	if !idd.sessions.reserve(idd.server) {
		writeRPCError(w, http.StatusServiceUnavailable, -32000,
			"too many MCP sessions for this identity, all in use: end one (DELETE) or reuse it")
		return
	}
	defer func() { idd.sessions.created(w.Header().Get(sessionHeader)) }()
	idd.handler.ServeHTTP(w, r)
}

// subscribe admits a subscription only to a skill the identity sees, so a
// session's subscriptions are bounded by the skills there are.
func (idd *identityDoor) subscribe(_ context.Context, req *sdk.SubscribeRequest) error {
	idd.mu.Lock()
	_, ok := idd.res[req.Params.URI]
	idd.mu.Unlock()
	if !ok {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no skill %s to subscribe to", req.Params.URI)}
	}
	return nil
}
