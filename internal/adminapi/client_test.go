package adminapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolgate/toolgate/internal/wire"
)

// TestCallEscapesNames: the agent and tool names reach the server exactly,
// whatever characters they hold.
func TestCallEscapesNames(t *testing.T) {
	var gotAgent, gotTool string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{agent}/tools/{tool}/call", func(w http.ResponseWriter, r *http.Request) {
		gotAgent, gotTool = r.PathValue("agent"), r.PathValue("tool")
		wire.WriteJSON(w, map[string]any{})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &Client{http: srv.Client(), base: srv.URL, token: "t"}
	for _, tc := range []struct{ agent, tool string }{
		{"demo", "git"},
		{"demo", "git#push"},
		{"demo", "a?b=c"},
		{"de/mo", "x"},
		{"demo", "srv.tool name"},
	} {
		gotAgent, gotTool = "", ""
		if _, err := c.Call(context.Background(), tc.agent, tc.tool, map[string]any{}, nil, nil); err != nil {
			t.Errorf("%q/%q: %v", tc.agent, tc.tool, err)
			continue
		}
		if gotAgent != tc.agent || gotTool != tc.tool {
			t.Errorf("sent %q/%q, server saw %q/%q", tc.agent, tc.tool, gotAgent, gotTool)
		}
	}
}
