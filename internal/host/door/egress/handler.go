package egress

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// The agent socket's egress route. The in-sandbox forwarder sends
//
//	CONNECT /v1/egress HTTP/1.1
//	Toolgate-Target: host:port
//	Toolgate-Parent: <id of the exec call whose process connects>
//
// and gets "200 Connection established" followed by the tunnel, or a JSON
// api.Error: 400 bad target, 403 denied, 429 too many connections, 502 the
// destination could not be reached, 503 audit unavailable.
//
// The path and header names are proto's, shared with the forwarder.
const (
	Pattern   = "CONNECT " + proto.EgressPath
	RuleLimit = "egress.limit" // the agent's concurrent connections are all in use
)

// Handler serves Pattern on the agent sockets. It outlives configuration
// reloads: its limiter counts the tunnels still open under an older one.
type Handler struct {
	gw  *gateway.Gateway
	lim *Limiter
}

// NewHandler returns the egress route for the gateway's agent sockets; mount
// it with agentsock.Server.Handle(egress.Pattern, h).
func NewHandler(gw *gateway.Gateway) *Handler {
	return &Handler{gw: gw, lim: NewLimiter(0)}
}

// Open is how many tunnels an agent has open now.
func (h *Handler) Open(agent string) int { return h.lim.Open(agent) }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	args, _ := json.Marshal(Args{Target: r.Header.Get(proto.HeaderTarget)})
	call := &gateway.Call{Agent: agentsock.Agent(ctx), Kind: gateway.KindEgress, Tool: ToolName, Args: args, Via: "egress"}
	// A hint for correlation only; kept when it could be a call id.
	if p := r.Header.Get(proto.HeaderParent); proto.ValidCallID(p) {
		call.Parent = p
	}
	if p, ok := agentsock.PeerOf(ctx); ok {
		call.Detail = map[string]any{"peer": p}
	}

	// Slots are taken before anything else costs: a client opening
	// thousands of connections gets refusals, each on the record.
	if t, ok := h.gw.Snapshot().ByKind[gateway.KindEgress].(*Tool); ok {
		if max, ok := t.MaxConnections(call.Agent); ok {
			if err := h.lim.AcquireMax(call.Agent, max); err != nil {
				dec := gateway.Decision{Rule: RuleLimit, Reason: err.Error()}
				wire.Refused(w, http.StatusTooManyRequests, "too_many", h.gw.Refuse(call.Agent, call, dec))
				return
			}
			defer h.lim.Release(call.Agent)
		}
	}

	down := &hijacker{w: w}
	_, err := h.gw.Handle(WithDownstream(ctx, down), call, nil)
	if down.accepted() || err == nil {
		return // the tunnel ran; its end is in the result entry
	}
	var denied *gateway.DeniedError
	status, e := wire.ErrorFor(err)
	if !errors.As(err, &denied) && !errors.Is(err, gateway.ErrAuditUnavailable) {
		status, e = http.StatusBadGateway, &api.Error{Code: "bad_gateway", Message: err.Error()}
	}
	e.ID = call.ID
	wire.WriteError(w, status, e)
}

// hijacker is the Downstream of a socket request: accepting takes the
// connection over from the HTTP server and answers 200.
type hijacker struct {
	w    http.ResponseWriter
	mu   sync.Mutex
	done bool
}

func (h *hijacker) accepted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}

func (h *hijacker) Accept() (net.Conn, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	conn, brw, err := http.NewResponseController(h.w).Hijack()
	if err != nil {
		return nil, err
	}
	h.done = true
	_ = conn.SetDeadline(time.Time{}) // the tunnel sets its own
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		return nil, err
	}
	if brw.Reader.Buffered() > 0 {
		// The client did not wait for the 200 (e.g. an eager TLS hello).
		return &bufferedConn{Conn: conn, r: brw.Reader}, nil
	}
	return conn, nil
}

// bufferedConn reads what the HTTP server had buffered before the conn.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}

// CloseWrite keeps the half-close Tunnel relies on.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
