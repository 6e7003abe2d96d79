package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolgate/toolgate/internal/proto/api"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// TestCallEscapesNames: the agent and tool names reach the server exactly,
// whatever characters they hold.
func TestCallEscapesNames(t *testing.T) {
	t.Parallel()
	var gotAgent, gotTool string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{agent}/tools/{tool}/call", func(w http.ResponseWriter, r *http.Request) {
		gotAgent, gotTool = r.PathValue("agent"), r.PathValue("tool")
		writeJSON(w, map[string]any{})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := tcpClient(srv)
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

// TestCallKeepsIntegers: a byte count in a result prints as the integer it
// is (it printed 1.048576e+06 when decoded as a float), streamed or not.
func TestCallKeepsIntegers(t *testing.T) {
	t.Parallel()
	const big = 1<<53 + 1 // not exact as a float64 either
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{agent}/tools/{tool}/call", func(w http.ResponseWriter, r *http.Request) {
		res := &api.Result{Output: map[string]any{"bytes": 1 << 20, "big": big}}
		if r.Header.Get("Accept") == api.MediaNDJSON {
			w.Header().Set("Content-Type", api.MediaNDJSON)
			_ = json.NewEncoder(w).Encode(api.Frame{Result: res})
			return
		}
		writeJSON(w, res)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := tcpClient(srv)
	for _, stream := range []bool{false, true} {
		var out io.Writer
		if stream {
			out = io.Discard
		}
		res, err := c.Call(context.Background(), "demo", "write", map[string]any{}, out, out)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := res.Output.(map[string]any)
		if got := fmt.Sprint(m["bytes"]); got != "1048576" {
			t.Errorf("stream=%v: bytes printed as %q, want 1048576", stream, got)
		}
		if got := fmt.Sprint(m["big"]); got != "9007199254740993" {
			t.Errorf("stream=%v: big printed as %q, want 9007199254740993", stream, got)
		}
	}
}

// tcpClient is a client of srv, a test server on loopback TCP.
func tcpClient(srv *httptest.Server) *Client {
	addr := srv.Listener.Addr().String()
	return &Client{network: "tcp", addr: addr, host: addr, token: "t"}
}

// writeJSON answers v as JSON, as the gateway's servers do (package wire,
// which imports this one).
func writeJSON(w http.ResponseWriter, v any) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	_ = json.NewEncoder(w).Encode(v)
}

// TestReadFramesBrokenMidLine: a stream that breaks in the middle of a
// frame is reported as the break (its cause kept for errors.Is), not as a
// malformed frame — the scanner hands over the part of the line it had.
func TestReadFramesBrokenMidLine(t *testing.T) {
	t.Parallel()
	cut := errors.New("connection cut")
	for _, tt := range []struct {
		name   string
		stream io.Reader
		want   string
	}{
		{"cut mid-line", io.MultiReader(strings.NewReader(`{"stdout":"aGk="}`+"\n"+`{"stdo`), iotest.ErrReader(cut)), "stream from gateway broken: connection cut"},
		{"cut between lines", io.MultiReader(strings.NewReader(`{"stdout":"aGk="}`+"\n"), iotest.ErrReader(cut)), "stream from gateway broken: connection cut"},
		{"a bad frame, whole", strings.NewReader(`{"stdo` + "\n"), "bad frame from gateway"},
	} {
		var out bytes.Buffer
		_, err := ReadFrames(tt.stream, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) || (strings.Contains(tt.want, "broken") && !errors.Is(err, cut)) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}
