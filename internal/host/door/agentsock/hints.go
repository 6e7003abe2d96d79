package agentsock

import (
	"maps"
	"net/http"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
)

// RunHints links call to the run its process belongs to: the in-sandbox
// client sends the exec call its process runs under (proto.HeaderParent,
// from TOOLGATE_CALL_ID) and that exec's session (proto.HeaderSession,
// from TOOLGATE_SESSION), which toolgate run gives claude and claude
// passes on to its hooks and MCP servers. The exec becomes the call's
// parent, when it has none, and the run's session its session; the
// session the call had from its own door (Claude Code's, the MCP
// session's) is kept in its detail under ownKey. Hints, checked for shape
// only: the gateway links a parent only to a call of the same agent.
func RunHints(h http.Header, call *gateway.Call, ownKey string) {
	if p := h.Get(proto.HeaderParent); proto.ValidCallID(p) && call.Parent == "" {
		call.Parent = p
	}
	s := h.Get(proto.HeaderSession)
	if !proto.ValidCallID(s) || s == call.Session {
		return
	}
	if call.Session != "" {
		call.Detail = maps.Clone(call.Detail)
		if call.Detail == nil {
			call.Detail = map[string]any{}
		}
		call.Detail[ownKey] = call.Session
	}
	call.Session = s
}
