package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/agentsock/sockettest"
	"github.com/toolgate/toolgate/internal/host/door/mcp"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
)

// mcpSession runs a bridge to a real MCP door on an agent socket; send
// writes a line to the bridge, recv reads the next message it writes.
func mcpSession(t *testing.T, socket string, hints [][2]string) (send func(string), recv func() map[string]any, done <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- NewMCPBridge(socket, hints).Serve(context.Background(), inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close() })
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send = func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv = func() map[string]any {
		t.Helper()
		got := make(chan bool, 1)
		go func() { got <- lines.Scan() }()
		select {
		case ok := <-got:
			if !ok {
				t.Fatalf("bridge output ended: %v", lines.Err())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no answer from the bridge")
		}
		if strings.Contains(lines.Text(), "\n") {
			t.Fatalf("a message over two lines: %q", lines.Text())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("bridge wrote %q: %v", lines.Text(), err)
		}
		return m
	}
	return send, recv, errc
}

// The stdio bridge carries an MCP client's session to the door on the
// agent socket: the door knows the agent from the socket, its tool calls
// are decided and recorded like any other — in the session of the run the
// client runs under, beneath its exec, naming the model's tool_use id the
// client gave — and failures reach the client as JSON-RPC errors instead
// of silence.
func TestMCPBridge(t *testing.T) {
	t.Setenv(proto.EnvCallID, "run-exec-1")
	t.Setenv(proto.SessionEnv, "run-session-1")
	env := sockettest.New(t, sockettest.Allowlist{"demo": {"echo"}})
	door := mcp.New(env.GW, mcp.Options{})
	env.Server.Handle("/mcp", door.Handler(mcp.AgentIdentity(func(r *http.Request) (string, bool) {
		a := agentsock.Agent(r.Context())
		return a, a != ""
	})))
	env.Serve(t, "demo")
	send, recv, done := mcpSession(t, env.SocketPath("demo"), runHints())

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if m := recv(); m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for line, code := range map[string]float64{`not json`: -32700, `[1,2]`: -32600, `"a string"`: -32600} {
		send(line)
		if m := recv(); !strings.Contains(mustJSON(m), `"id":null`) || !strings.Contains(mustJSON(m), fmt.Sprintf(`"code":%v`, code)) {
			t.Fatalf("%s: %v, want error %v with a null id", line, m, code)
		}
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m := recv()
	if m["id"] != float64(2) || !strings.Contains(mustJSON(m), `"name":"echo"`) {
		t.Fatalf("tools/list: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"argv":["through","the","door"]},"_meta":{"claudecode/toolUseId":"toolu_01door"}}}`)
	if m := recv(); m["id"] != float64(3) || !strings.Contains(mustJSON(m), "through the door") {
		t.Fatalf("tools/call: %v", m)
	}
	var called bool
	for _, e := range env.Entries(t) {
		if e.Agent == "demo" && e.Tool == "echo" && e.Via == mcp.Via {
			called = true
			own, _ := e.Detail[mcp.DetailSession].(string)
			if e.Session != "run-session-1" || e.Parent != "run-exec-1" || own == "" || e.Detail[gateway.DetailToolUseID] != "toolu_01door" {
				t.Errorf("%s entry not in the run's session under its exec, with the tool_use id: session %q parent %q detail %v",
					e.Phase, e.Session, e.Parent, e.Detail)
			}
		}
	}
	if !called {
		t.Fatal("the call through the bridge is not in the audit log as the socket's agent via mcp")
	}

	env.Server.Close() // the gateway goes away mid-session
	send(`{"jsonrpc":"2.0","id":"four","method":"tools/list"}`)
	if m := recv(); m["id"] != "four" || !strings.Contains(mustJSON(m), "toolgate MCP door") {
		t.Fatalf("with the gateway gone: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`) // nobody to tell: no answer
	send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if m := recv(); m["id"] != float64(5) {
		t.Fatalf("after a notification: %v", m)
	}
	_ = done
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
