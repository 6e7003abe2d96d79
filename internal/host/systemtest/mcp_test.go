package systemtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/testenv"
)

type bearer struct {
	secret string
	next   http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.secret)
	return b.next.RoundTrip(r)
}

// TestMCPDoorOnHostListener: an MCP client on the host reaches the agent's
// core tools, which act in its sandbox, through the same pipeline.
func TestMCPDoorOnHostListener(t *testing.T) {
	e := New(t, "mcp")
	a := e.Agents[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf("gateway:\n  clientBinary: %s\n  listen: %s\nagents:\n", clientBin, addr) + fmt.Sprintf(AgentYAML, a)
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Start()

	store, err := auth.OpenStore(e.Home + "/" + auth.StoreFile)
	if err != nil {
		t.Fatal(err)
	}
	connect := func(scope auth.Scope, agent string) (*sdk.ClientSession, error) {
		secret, _, err := store.Create(scope, agent, 0)
		if err != nil {
			t.Fatal(err)
		}
		tr := &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{secret, http.DefaultTransport}}}
		return sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	}
	cs, err := connect(auth.ScopeMCP, a)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "exec,patch,read,write" {
		t.Fatalf("tools/list: %v", names)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo from-the-sandbox; id -u"}})
	if err != nil || res.IsError {
		t.Fatalf("exec over MCP: %v %+v", err, res)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if !strings.Contains(text, "from-the-sandbox") || !strings.Contains(text, "1000") {
		t.Fatalf("exec over MCP returned %s", text)
	}
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "rm -rf /workspace"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "no recursive removal") {
		t.Fatalf("denied exec over MCP: %v %+v", err, res)
	}
	// A tool the identity is not offered is a denial on the record, as on
	// the other doors, not an unrecorded "unknown tool".
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "teleport", Arguments: map[string]any{"to": "mars"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "denied by mcp.unoffered") {
		t.Fatalf("unoffered tool over MCP: %v %+v", err, res)
	}
	var viaMCP int
	for _, en := range e.Entries(audit.Filter{Agent: a}) {
		if en.Via == "mcp" {
			viaMCP++
		}
	}
	if viaMCP != 4 { // decision + result of the allowed call, two denials
		t.Fatalf("%d audit entries via mcp", viaMCP)
	}
	if got := e.Entries(audit.Filter{Agent: a, Tool: "teleport"}); len(got) != 1 || got[0].Rule != "mcp.unoffered" || got[0].Decision != "deny" {
		t.Fatalf("unoffered call on record: %+v", got)
	}
	// A bad token on /mcp is on record as refused at the MCP door.
	req, _ := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer tg_wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("bad token on /mcp: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	if got := e.Entries(audit.Filter{Type: "admin"}); len(got) != 1 || got[0].Via != "mcp" || got[0].Rule != "auth.token" {
		t.Fatalf("refusal on /mcp: %+v", got)
	}
	// A skills token cannot call tools; an admin token is not an MCP token.
	if sk, err := connect(auth.ScopeSkills, ""); err == nil {
		if _, err := sk.CallTool(context.Background(), &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "true"}}); err == nil {
			t.Fatal("a skills token called a tool")
		}
		sk.Close()
	}
	if _, err := connect(auth.ScopeAdmin, ""); err == nil {
		t.Fatal("an admin token opened an MCP session")
	}
	e.Verify()
}
