package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/auth"
)

func TestToolsListFiltered(t *testing.T) {
	f := newFixture(t, testConfig, Options{})
	a := f.mustConnect(t, f.token(t, auth.ScopeMCP, "a"))
	if got, want := toolNames(t, a), []string{"echo", "exec", "read", "write"}; !slices.Equal(got, want) {
		t.Fatalf("agent a sees %v, want %v", got, want)
	}
	b := f.mustConnect(t, f.token(t, auth.ScopeMCP, "b"))
	if got, want := toolNames(t, b), []string{"exec", "patch", "read", "write"}; !slices.Equal(got, want) {
		t.Fatalf("agent b sees %v, want %v", got, want)
	}
	res, _ := b.ListTools(context.Background(), nil)
	for _, tl := range res.Tools {
		schema, _ := json.Marshal(tl.InputSchema)
		if tl.Description == "" || !strings.Contains(string(schema), `"additionalProperties":false`) {
			t.Errorf("%s: description %q schema %s", tl.Name, tl.Description, schema)
		}
	}
}

func callText(res *sdk.CallToolResult) string {
	var s []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

func TestToolCallAudited(t *testing.T) {
	f := newFixture(t, testConfig, Options{})
	cs := f.mustConnect(t, f.token(t, auth.ScopeMCP, "a"))
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"argv": []string{"hello", "door"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(callText(res), "hello door") {
		t.Fatalf("echo result %+v %q", res, callText(res))
	}
	es := f.auditEntries(t, "echo")
	if len(es) != 2 {
		t.Fatalf("%d audit entries, want decision and result", len(es))
	}
	for _, e := range es {
		if e.Via != Via || e.Agent != "a" || e.Session != cs.ID() || e.ID != es[0].ID {
			t.Errorf("audit entry %+v", e)
		}
	}
	if es[0].Decision != "allow" || es[1].Phase != "result" {
		t.Errorf("entries %+v %+v", es[0], es[1])
	}
}

func TestDenialIsToolError(t *testing.T) {
	f := newFixture(t, testConfig, Options{})
	cs := f.mustConnect(t, f.token(t, auth.ScopeMCP, "a"))
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"argv": []string{"forbidden"}}})
	if err != nil {
		t.Fatalf("a denial must be a tool result, got a protocol error: %v", err)
	}
	text := callText(res)
	if !res.IsError || !strings.Contains(text, "no-forbidden") || !strings.Contains(text, "forbidden words stay out") {
		t.Fatalf("denial %+v %q", res, text)
	}
	es := f.auditEntries(t, "echo")
	if len(es) != 1 || es[0].Decision != "deny" || es[0].Rule != "no-forbidden" || es[0].Via != Via {
		t.Fatalf("audit %+v", es)
	}
	// A tool the agent may not see is not callable either (b has no echo),
	// and the attempt is a denial on the record, as on the other doors.
	b := f.mustConnect(t, f.token(t, auth.ScopeMCP, "b"))
	res, err = b.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"argv": []string{"x"}}})
	if err != nil || !res.IsError || !strings.Contains(callText(res), "denied by mcp.unoffered") {
		t.Fatalf("agent b calling a tool it is not offered: %v %+v", err, res)
	}
	es = f.auditEntries(t, "echo")
	if len(es) != 2 || es[1].Agent != "b" || es[1].Decision != "deny" || es[1].Rule != "mcp.unoffered" || es[1].Via != Via {
		t.Fatalf("audit %+v", es)
	}
}

func TestSchemaViolationRunsNothing(t *testing.T) {
	f := newFixture(t, testConfig, Options{})
	cs := f.mustConnect(t, f.token(t, auth.ScopeMCP, "b"))
	for _, c := range []struct {
		tool string
		args any
	}{
		{"exec", map[string]any{"argv": "not-a-list"}},
		{"exec", map[string]any{"command": "ls", "argv": []string{"ls"}}},
		{"exec", map[string]any{"command": "ls", "sudo": true}},
		{"exec", nil},
		{"read", map[string]any{"path": 7}},
	} {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s %v: protocol error %v", c.tool, c.args, err)
		}
		if !res.IsError || !strings.Contains(callText(res), "args.invalid") {
			t.Errorf("%s %v: %q", c.tool, c.args, callText(res))
		}
	}
	if n := len(f.sandbox.Execs()); n != 0 {
		t.Fatalf("%d execs ran for invalid arguments", n)
	}
	for _, e := range f.auditEntries(t, "exec") {
		if e.Decision != "deny" || e.Rule != "args.invalid" {
			t.Fatalf("audit %+v", e)
		}
	}
	// The same session still works.
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"true"}}})
	if err != nil || res.IsError || len(f.sandbox.Execs()) != 1 {
		t.Fatalf("valid exec after bad ones: %v %q", err, callText(res))
	}
}

// post sends one raw JSON-RPC body to the MCP route.
func post(t *testing.T, url, secret, session, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawSession opens a session with raw HTTP (protocol 2025-03-26, which
// still allows batches) and returns its id.
func rawSession(t *testing.T, f *fixture, secret string) string {
	t.Helper()
	resp, body := post(t, f.url, secret, "", initBody)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	post(t, f.url, secret, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

func TestTokenMatrix(t *testing.T) {
	f := newFixture(t, testConfig, Options{})
	writeSkill(t, f.home, "skills/one", "---\nname: one\ndescription: first\n---\n# One\n")
	mcpA := f.token(t, auth.ScopeMCP, "a")
	mcpB := f.token(t, auth.ScopeMCP, "b")
	admin := f.token(t, auth.ScopeAdmin, "")
	skills := f.token(t, auth.ScopeSkills, "")
	revoked := f.token(t, auth.ScopeMCP, "a")
	expired, _, _ := f.tokens.Create(auth.ScopeMCP, "a", time.Nanosecond)
	ghost := f.token(t, auth.ScopeMCP, "deleted-agent")
	list, _ := f.tokens.List()
	if err := f.tokens.Revoke(list[4].ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // the nanosecond token is expired by now

	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["true"]}}}`
	listRes := `{"jsonrpc":"2.0","id":3,"method":"resources/list"}`
	cases := []struct {
		name   string
		secret string
		body   string
		want   int
	}{
		{"no token", "", initBody, 401},
		{"malformed", "tg_not-a-token", initBody, 401},
		{"not bearer-shaped", "garbage", initBody, 401},
		{"expired", expired, initBody, 401},
		{"revoked", revoked, initBody, 401},
		{"admin token on the MCP door", admin, initBody, 401},
		{"mcp token", mcpA, initBody, 200},
		{"mcp token for an agent no longer configured", ghost, initBody, 403},
		{"skills token initialize", skills, initBody, 200},
		{"skills token resources/list", skills, listRes, 200},
		{"skills token tool call", skills, call, 401},
		{"skills token batch hiding a tool call", skills, "[" + listRes + "," + call + "]", 401},
		{"skills token, body not JSON", skills, "{", 401},
		{"skills token, method key in two cases", skills, `{"jsonrpc":"2.0","id":4,"method":"tools/call","METHOD":"resources/list","params":{"name":"exec","arguments":{"argv":["true"]}}}`, 401},
	}
	skillsSession := rawSession(t, f, skills)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sid := ""
			if c.body != initBody {
				sid = skillsSession
			}
			resp, body := post(t, f.url, c.secret, sid, c.body)
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.want, body)
			}
			if strings.Contains(body, "tg_") {
				t.Fatal("response echoes a token")
			}
		})
	}
	// The admin API takes only the admin token.
	for name, c := range map[string]struct {
		secret string
		want   int
	}{"skills": {skills, 401}, "mcp": {mcpA, 401}, "admin": {admin, 200}, "none": {"", 401}} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/agents", nil)
		if c.secret != "" {
			req.Header.Set("Authorization", "Bearer "+c.secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("admin API with %s token: %d, want %d", name, resp.StatusCode, c.want)
		}
	}
	// A session belongs to its identity: agent b cannot ride agent a's.
	sidA := rawSession(t, f, mcpA)
	resp, _ := post(t, f.url, mcpB, sidA, call)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("agent b on agent a's session: %d", resp.StatusCode)
	}
	if got := len(f.auditEntries(t, "exec")); got != 0 {
		t.Fatalf("%d exec entries from refused requests", got)
	}
	// Through its own token, b acts as b, whatever it sends.
	cs := f.mustConnect(t, mcpB)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"argv": []string{"true"}}}); err != nil {
		t.Fatal(err)
	}
	if es := f.auditEntries(t, "exec"); len(es) != 2 || es[0].Agent != "b" {
		t.Fatalf("audit %+v", es)
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t, testConfig, Options{})
	secret := f.token(t, auth.ScopeMCP, "a")
	sid := rawSession(t, f, secret)

	resp, body := post(t, f.url, secret, sid, "this is not JSON")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("non-JSON body: %d %s", resp.StatusCode, body)
	}

	var batch strings.Builder
	batch.WriteString("[")
	for i := range 10000 {
		if i > 0 {
			batch.WriteString(",")
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["true"]}}}`, i+100)
	}
	batch.WriteString("]")
	resp, body = post(t, f.url, secret, sid, batch.String())
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "over the limit") {
		t.Fatalf("batch of 10000: %d %s", resp.StatusCode, body)
	}
	if n := len(f.sandbox.Execs()); n != 0 {
		t.Fatalf("%d execs ran from a refused batch", n)
	}

	resp, body = post(t, f.url, secret, sid, `{"jsonrpc":"2.0","id":9,"method":"tools/teleport","params":{}}`)
	if resp.StatusCode == 200 && !strings.Contains(body, "-32601") {
		t.Fatalf("unknown method: %d %s", resp.StatusCode, body)
	}

	// The server is still serving, on the same session.
	resp, body = post(t, f.url, secret, sid, `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"echo"`) {
		t.Fatalf("after bad requests: %d %s", resp.StatusCode, body)
	}
}
