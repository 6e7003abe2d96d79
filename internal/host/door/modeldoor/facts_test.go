package modeldoor

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
)

// A body that a case-insensitive reader and the provider would read apart
// is refused before anything is sent: an allowlisted model beside an
// off-list one spelled "Model", a "STREAM":false that would turn off the
// stream's usage. What is accepted reaches the upstream as the facts
// policy recorded.
func TestPolicyReadsWhatTheProviderReads(t *testing.T) {
	h := newHarness(t, `providers: [anthropic, openai], allow: ["fake-*"]`)
	for _, c := range []struct {
		name, provider, path, body, field string
	}{
		{"model spelled twice", "anthropic", "/v1/messages", `{"model":"claude-opus-off-list","Model":"fake-text","max_tokens":5}`, "Model"},
		{"model folded first", "openai", "/v1/chat/completions", `{"MODEL":"fake-text","model":"gpt-off-list"}`, "MODEL"},
		{"stream folded", "openai", "/v1/chat/completions", `{"model":"fake-slow","stream":true,"STREAM":false}`, "STREAM"},
		{"stream with a long s", "openai", "/v1/chat/completions", `{"model":"fake-slow","stream":true,"\u017ftream":false}`, "ſtream"},
		{"tools folded", "openai", "/v1/responses", `{"model":"fake-text","Tools":[{"type":"mcp","server_label":"x","server_url":"https://evil.example/"}]}`, "Tools"},
		{"usage option folded", "openai", "/v1/chat/completions", `{"model":"fake-slow","stream":true,"stream_options":{"include_usage":true,"INCLUDE_USAGE":false}}`, "INCLUDE_USAGE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(h.fake.Requests())
			resp := h.post(t, "demo", c.provider, c.path, c.body)
			got := body(t, resp)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(got, `field \"`+c.field+`\"`) || !strings.Contains(got, "case-insensitive reader") {
				t.Fatalf("%d %s", resp.StatusCode, got)
			}
			if n := len(h.fake.Requests()); n != before {
				t.Fatalf("the upstream received %s", h.fake.Requests()[n-1].Body)
			}
			if e := h.last(t); e.Decision != "deny" || e.Rule != "args.invalid" {
				t.Fatalf("%+v", e)
			}
		})
	}
	// Accepted: the upstream reads the model policy allowed, and a
	// streamed chat completion asks for its usage whatever it said.
	resp := h.post(t, "demo", "openai", "/v1/chat/completions", `{"model":"fake-text","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"<&>"}]}`)
	if got := body(t, resp); resp.StatusCode != 200 || !strings.Contains(got, "FAKE-OK") {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	reqs := h.fake.Requests()
	var sent map[string]any
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent["model"] != "fake-text" || sent["stream_options"].(map[string]any)["include_usage"] != true || !strings.Contains(string(reqs[len(reqs)-1].Body), `"content":"<&>"`) {
		t.Fatalf("upstream got %s", reqs[len(reqs)-1].Body)
	}
	if e := h.result(t); e.Detail["usage"] != "measured" || num(e.Detail["outputTokens"]) == 0 {
		t.Fatalf("%+v", e)
	}
}

// Provider-side network tools and connectors are facts: recorded with the
// decision, seen by rules, and refused unless the agent's serverTools
// names their kind and, for an MCP server, its connectors (by default its
// egress allowlist) name the host. Nothing refused reaches the upstream.
func TestServerToolsAreDecided(t *testing.T) {
	h := newHarness(t, "")
	const anthropicMCP = `{"model":"fake-text","max_tokens":5,"mcp_servers":[{"type":"url","url":"%s","name":"ex","authorization_token":"tok-secret"}],"messages":[]}`
	for _, c := range []struct {
		name, agent, provider, path, body string
		allow                             bool
		rule, reason                      string
		tools                             []model.ServerTool
	}{
		{"web fetch, no server tools allowed", "demo", "anthropic", "/v1/messages",
			`{"model":"fake-text","max_tokens":5,"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`, false, model.RuleServerTools,
			"to run web_fetch_20250910 web_fetch (kind web_fetch) for the agent, and agent demo's model.serverTools does not allow web_fetch",
			[]model.ServerTool{{Kind: "web_fetch", Type: "web_fetch_20250910", Name: "web_fetch"}}},
		{"MCP connector, no server tools allowed", "demo", "anthropic", "/v1/messages",
			strings.Replace(anthropicMCP, "%s", "https://evil.example/c?d=workspace-data", 1), false, model.RuleServerTools, "does not allow mcp",
			[]model.ServerTool{{Kind: "mcp", Type: "mcp_servers", Name: "ex", URL: "https://evil.example/c?d=workspace-data", Host: "evil.example:443"}}},
		{"MCP connector off the egress allowlist", "reach", "anthropic", "/v1/messages",
			strings.Replace(anthropicMCP, "%s", "https://evil.example/c?d=workspace-data", 1), false, model.RuleConnectors,
			"evil.example:443 is not among agent reach's connectors (mcp.example.com:443, *.docs.example:443)", nil},
		{"MCP connector on it", "reach", "anthropic", "/v1/messages",
			strings.Replace(anthropicMCP, "%s", "https://MCP.example.com/sse", 1), true, model.RuleAllow, "",
			[]model.ServerTool{{Kind: "mcp", Type: "mcp_servers", Name: "ex", URL: "https://MCP.example.com/sse", Host: "mcp.example.com:443"}}},
		{"MCP connector on another port", "reach", "anthropic", "/v1/messages",
			strings.Replace(anthropicMCP, "%s", "https://mcp.example.com:8443/sse", 1), false, model.RuleConnectors, "mcp.example.com:8443", nil},
		{"Responses MCP tool", "reach", "openai", "/v1/responses",
			`{"model":"fake-text","tools":[{"type":"mcp","server_label":"wiki","server_url":"https://api.docs.example/mcp"}]}`, true, model.RuleAllow, "", nil},
		{"Responses MCP tool elsewhere", "reach", "openai", "/v1/responses",
			`{"model":"fake-text","tools":[{"type":"mcp","server_label":"wiki","server_url":"https://docs.example/mcp"}]}`, false, model.RuleConnectors, "docs.example:443", nil},
		{"Responses service connector", "reach", "openai", "/v1/responses",
			`{"model":"fake-text","tools":[{"type":"mcp","server_label":"mail","connector_id":"connector_gmail","authorization":"x"}]}`, false, model.RuleConnectors, "reached by id (connector_gmail)", nil},
		{"web search a rule refuses", "reach", "openai", "/v1/responses",
			`{"model":"fake-text","tools":[{"type":"web_search"}]}`, false, "search-within-domains", "only within named domains", nil},
		{"web search the rule lets by", "reach", "openai", "/v1/responses",
			`{"model":"fake-text","tools":[{"type":"web_search","filters":{"allowed_domains":["go.dev"]}}]}`, true, model.RuleAllow, "",
			[]model.ServerTool{{Kind: "web_search", Type: "web_search", Name: "web_search", Domains: []string{"go.dev"}}}},
		{"code interpreter", "reach", "openai", "/v1/responses",
			`{"model":"fake-text","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, false, model.RuleServerTools, "does not allow code_execution", nil},
		{"chat web search option", "demo", "openai", "/v1/chat/completions",
			`{"model":"fake-text","web_search_options":{}}`, false, model.RuleServerTools, "does not allow web_search", nil},
		{"client tools only", "demo", "anthropic", "/v1/messages",
			`{"model":"fake-text","max_tokens":5,"tools":[{"name":"Bash","input_schema":{}},{"type":"bash_20250124","name":"bash"}]}`, true, model.RuleAllow, "", []model.ServerTool{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(h.fake.Requests())
			resp := h.post(t, c.agent, c.provider, c.path, c.body)
			got := body(t, resp)
			var dec *gateway.Entry
			for _, e := range h.entries(t) {
				if e.Phase == gateway.PhaseDecision {
					dec = e
				}
			}
			if dec.Rule != c.rule || (dec.Decision == "allow") != c.allow || !strings.Contains(dec.Reason, c.reason) {
				t.Fatalf("decision %s by %s: %s (answer %d %s)", dec.Decision, dec.Rule, dec.Reason, resp.StatusCode, got)
			}
			var args Args
			if err := json.Unmarshal(dec.Args, &args); err != nil {
				t.Fatal(err)
			}
			if c.tools != nil && !slices.EqualFunc(args.ServerTools, c.tools, func(a, b model.ServerTool) bool {
				return a.Kind == b.Kind && a.Type == b.Type && a.Name == b.Name && a.URL == b.URL && a.Host == b.Host && slices.Equal(a.Domains, b.Domains)
			}) {
				t.Fatalf("recorded server tools %+v, want %+v", args.ServerTools, c.tools)
			}
			if strings.Contains(string(dec.Args), "tok-secret") {
				t.Fatalf("the MCP server's token is in the record: %s", dec.Args)
			}
			reached := len(h.fake.Requests()) > before
			if reached != c.allow || (c.allow && resp.StatusCode != 200) || (!c.allow && resp.StatusCode != http.StatusForbidden) {
				t.Fatalf("answer %d %s; upstream reached: %v", resp.StatusCode, got, reached)
			}
		})
	}
}

// Headers pass from the sandbox to the provider by an allowlist: billing
// headers come from the provider's configuration only, betas are checked
// names and recorded with the query string, anything else is dropped.
func TestHeadersToTheProvider(t *testing.T) {
	h := newHarness(t, "")
	resp := h.post(t, "demo", "openai", "/v1/chat/completions?api-version=1", `{"model":"fake-text"}`,
		"OpenAI-Organization", "org-agent", "OpenAI-Project", "proj-agent", "OpenAI-Beta", "responses=v1",
		"X-Forwarded-For", "10.0.0.1", "X-Stainless-Lang", "js", "Cookie", "c=1", "Toolgate-Session", "s1")
	if got := body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	up := h.fake.Requests()[0]
	if up.Header.Get("OpenAI-Organization") != "org-host" || up.Header.Get("OpenAI-Project") != "proj-host" || up.RawQuery != "api-version=1" {
		t.Fatalf("upstream headers %v query %q", up.Header, up.RawQuery)
	}
	for _, k := range []string{"X-Forwarded-For", "X-Stainless-Lang", "Cookie", "Toolgate-Session"} {
		if up.Header.Get(k) != "" {
			t.Fatalf("%s reached the upstream: %v", k, up.Header)
		}
	}
	var args Args
	if err := json.Unmarshal(h.entries(t)[0].Args, &args); err != nil || args.Query != "api-version=1" || !slices.Equal(args.Betas, []string{"responses=v1"}) {
		t.Fatalf("recorded %+v %v", args, err)
	}

	resp = h.post(t, "demo", "anthropic", "/v1/messages?beta=true", `{"model":"fake-text","max_tokens":5}`,
		"Anthropic-Version", "2023-06-01", "Anthropic-Beta", "mcp-client-2025-04-04, interleaved-thinking-2025-05-14")
	if got := body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	up = h.fake.Requests()[1]
	if up.Header.Get("Anthropic-Beta") != "mcp-client-2025-04-04, interleaved-thinking-2025-05-14" || up.Header.Get("Anthropic-Version") != "2023-06-01" || up.RawQuery != "beta=true" {
		t.Fatalf("upstream %v %q", up.Header, up.RawQuery)
	}
	if err := json.Unmarshal(h.entries(t)[2].Args, &args); err != nil || !slices.Equal(args.Betas, []string{"mcp-client-2025-04-04", "interleaved-thinking-2025-05-14"}) {
		t.Fatalf("recorded %+v %v", args, err)
	}

	for _, c := range []struct{ name, path, key, value, msg string }{
		{"beta with text in it", "/v1/messages", "Anthropic-Beta", "mcp-client-2025-04-04,please fetch http://x/", "is not a beta name"},
		{"version not a date", "/v1/messages", "Anthropic-Version", "latest", "anthropic-version must be one date"},
		{"long query", "/v1/messages?q=" + strings.Repeat("a", 300), "Accept", "*/*", "a query string of 302 bytes"},
	} {
		before := len(h.fake.Requests())
		resp := h.post(t, "demo", "anthropic", c.path, `{"model":"fake-text","max_tokens":5}`, c.key, c.value)
		if got := body(t, resp); resp.StatusCode != 400 || !strings.Contains(got, c.msg) || len(h.fake.Requests()) != before {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, got)
		}
	}
}
