package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/internal/lib/sse"
	"github.com/toolgate/toolgate/internal/proto"
)

func init() {
	commands["mcp"] = command{"mcp: the gateway's MCP door over stdio, for MCP clients in the sandbox (claude --mcp-config)", cmdMCP}
}

// maxMCPLine bounds one JSON-RPC message read from the MCP client.
const maxMCPLine = 16 << 20

// MCPBridge speaks MCP's stdio transport (one JSON-RPC message per line)
// to a client in the sandbox and streamable HTTP to the MCP door on the
// agent socket, so an MCP client needs no port and no network: the door
// knows the agent from the socket, as for every other call.
type MCPBridge struct {
	hc    *http.Client
	url   string
	hints [][2]string // header name and value sent with every message (runHints)

	mu      sync.Mutex // guards session and serialises writes to out
	session string
	out     io.Writer
}

// NewMCPBridge talks to the door at /mcp on the agent socket at socket.
// hints go with every message: the run the client belongs to (runHints),
// so its calls land in the run's session, under its exec.
func NewMCPBridge(socket string, hints [][2]string) *MCPBridge {
	return &MCPBridge{
		url:   "http://toolgate/mcp",
		hints: hints,
		hc: &http.Client{Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{Timeout: proto.DialTimeout}).DialContext(ctx, "unix", socket)
			},
			DisableCompression: true,
		}},
	}
}

// Serve relays messages from in to the door and the door's messages to
// out until in ends. The first message (initialize) is sent alone, so the
// door's session exists before anything else is; later ones are relayed
// concurrently, as a client may wait on one call while sending another.
func (b *MCPBridge) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	b.out = out
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxMCPLine)
	var wg sync.WaitGroup
	first := true
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		msg := append([]byte(nil), line...)
		if first {
			first = false
			b.relay(ctx, msg)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.relay(ctx, msg)
		}()
	}
	wg.Wait()
	b.closeSession()
	return sc.Err()
}

// relay posts one message and writes whatever the door answers: nothing
// (202, a notification), one JSON body, or an SSE stream of messages.
// Failures become a JSON-RPC error for a request, so the client is never
// left waiting.
func (b *MCPBridge) relay(ctx context.Context, msg []byte) {
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if !json.Valid(msg) {
		b.reply(nil, -32700, "parse error: the line is not JSON")
		return
	}
	if err := json.Unmarshal(msg, &head); err != nil {
		b.reply(nil, -32600, "invalid request: not a JSON-RPC message object")
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(msg))
	if err != nil {
		b.fail(head.ID, err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for _, h := range b.hints {
		req.Header.Set(h[0], h[1])
	}
	b.mu.Lock()
	if b.session != "" {
		req.Header.Set("Mcp-Session-Id", b.session)
	}
	b.mu.Unlock()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.fail(head.ID, "the gateway is unavailable: "+unwrapOp(err).Error())
		return
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		b.mu.Lock()
		b.session = s
		b.mu.Unlock()
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case resp.StatusCode == http.StatusAccepted:
	case resp.StatusCode/100 != 2:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		b.fail(head.ID, fmt.Sprintf("the door answered %s: %s", resp.Status, strings.TrimSpace(string(body))))
	case strings.HasPrefix(ct, "text/event-stream"):
		answered := false
		err := sse.Read(resp.Body, maxMCPLine, func(_ string, m []byte) {
			answered = answered || answers(m, head.ID)
			b.write(m)
		})
		if err != nil && !answered {
			b.fail(head.ID, "the door's stream broke: "+err.Error())
		}
	default:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxMCPLine))
		if err != nil {
			b.fail(head.ID, err.Error())
			return
		}
		b.write(body)
	}
}

// answers reports whether msg is the response to request id.
func answers(msg []byte, id json.RawMessage) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return len(id) > 0 && json.Unmarshal(msg, &m) == nil && m.Method == "" && bytes.Equal(m.ID, id)
}

// write puts one message on its own line; stdio messages hold no newline.
func (b *MCPBridge) write(msg []byte) {
	var buf bytes.Buffer
	if json.Compact(&buf, msg) != nil {
		return // not JSON: nothing a client could read
	}
	buf.WriteByte('\n')
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _ = b.out.Write(buf.Bytes())
}

// fail answers request id with a JSON-RPC error; a notification (no id)
// has nobody to tell.
func (b *MCPBridge) fail(id json.RawMessage, msg string) {
	if len(id) == 0 || string(id) == "null" {
		return
	}
	b.reply(id, -32000, msg)
}

// reply writes a JSON-RPC error for id; nil is JSON-RPC's null id, the
// answer to a line whose id could not be read (a client logs it instead
// of the line vanishing).
func (b *MCPBridge) reply(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	e, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": "toolgate MCP door: " + msg}})
	b.write(e)
}

// closeSession ends the door's session when the client goes away.
func (b *MCPBridge) closeSession() {
	b.mu.Lock()
	s := b.session
	b.mu.Unlock()
	if s == "" {
		return
	}
	req, err := http.NewRequest(http.MethodDelete, b.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", s)
	if resp, err := b.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

func cmdMCP(args []string, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: toolgate-client mcp (MCP over stdin/stdout, to the gateway's door)")
		return 2
	}
	if err := NewMCPBridge(socketPath(), runHints()).Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(stderr, "toolgate-client mcp: %v\n", err)
		return 1
	}
	return 0
}
