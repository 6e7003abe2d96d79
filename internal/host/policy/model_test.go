package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
)

const modelYAML = `
gateway:
  models:
    anthropic: {api: anthropic, url: "https://api.anthropic.com"}
    openai: {api: openai, url: "https://api.openai.com"}
agents:
  demo:
    default: deny
    model:
      providers: [anthropic]
      allow: ["claude-sonnet-*"]
      budget: {costPerDay: 2}
    rules:
      - {name: big, deny: 'kind == "model" && args.max_tokens > 10000', reason: too many tokens asked}
  plain: {}
`

// Model calls are decided on recorded facts: the provider, the model, what
// was spent (live or read back from the audit log), then the rules; an
// allowed model needs no allow rule even under default deny.
func TestDecideModel(t *testing.T) {
	t.Parallel()
	e := engine(t, modelYAML)
	replayed := map[string]any{}
	raw, _ := json.Marshal(model.Spent{Cost1d: 2.5})
	_ = json.Unmarshal(raw, &replayed)
	call := func(agent, provider, m string, maxTokens int, spent any) *gateway.Call {
		args, _ := json.Marshal(map[string]any{"provider": provider, "model": m, "max_tokens": maxTokens})
		c := &gateway.Call{Agent: agent, Kind: gateway.KindModel, Tool: provider, Args: args, Model: &gateway.ModelFacts{Name: m}}
		if s, ok := model.SpentOf(spent); ok {
			c.Model.Spent = &s
		}
		return c
	}
	for _, c := range []struct {
		name   string
		call   *gateway.Call
		allow  bool
		rule   string
		reason string
	}{
		{"allowed", call("demo", "anthropic", "claude-sonnet-4-5", 100, model.Spent{Cost1d: 1}), true, model.RuleAllow, "is allowed"},
		{"other provider", call("demo", "openai", "gpt-5", 100, model.Spent{}), false, model.RuleProvider, `may not use model provider "openai"`},
		{"no model section", call("plain", "anthropic", "claude-sonnet-4-5", 1, model.Spent{}), false, model.RuleProvider, "agent plain"},
		{"off the allowlist", call("demo", "anthropic", "claude-opus-4", 100, model.Spent{}), false, model.RuleAllow, "claude-opus-4"},
		{"over budget, replayed", call("demo", "anthropic", "claude-sonnet-4-5", 100, replayed), false, model.RuleCost, "$2.5000 spent in the last 24 hours"},
		{"nothing recorded", call("demo", "anthropic", "claude-sonnet-4-5", 100, nil), false, model.RuleTokens, "no record of what was spent"},
		{"rule sees the facts", call("demo", "anthropic", "claude-sonnet-4-5", 20000, model.Spent{}), false, "big", "too many tokens"},
	} {
		d := e.Decide(c.call)
		if d.Allow != c.allow || d.Rule != c.rule || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("%s: %+v", c.name, d)
		}
	}
}

// Server tools are decided from the call's recorded args, so a replay
// reaches the same decision: the kind must be in serverTools, an MCP
// server's host on the connectors (the egress allowlist unless set), and
// a server reached by id is never allowed.
func TestDecideServerTools(t *testing.T) {
	t.Parallel()
	e := engine(t, `
gateway:
  models:
    anthropic: {api: anthropic, url: "https://api.anthropic.com"}
agents:
  egress:
    egress: {allow: ["*.corp.example:443"]}
    model: {providers: [anthropic], serverTools: [mcp, web_fetch]}
  own:
    egress: {allow: ["*.corp.example:443"]}
    model: {providers: [anthropic], serverTools: [mcp], connectors: ["mcp.example.com:443"]}
  none:
    model: {providers: [anthropic], serverTools: [mcp]}
`)
	call := func(agent string, tools ...map[string]any) *gateway.Call {
		args, _ := json.Marshal(map[string]any{"provider": "anthropic", "model": "m", "server_tools": tools})
		return &gateway.Call{Agent: agent, Kind: gateway.KindModel, Tool: "anthropic", Args: args, Detail: map[string]any{"model": "m"}}
	}
	mcp := func(host string) map[string]any {
		return map[string]any{"kind": "mcp", "type": "mcp_servers", "name": "s", "url": "https://" + host + "/", "host": host}
	}
	for _, c := range []struct {
		name         string
		call         *gateway.Call
		allow        bool
		rule, reason string
	}{
		{"no server tools", call("none"), true, model.RuleAllow, ""},
		{"kind not listed", call("egress", map[string]any{"kind": "web_search", "type": "web_search_20250305", "name": "web_search"}), false, model.RuleServerTools,
			"to run web_search_20250305 web_search (kind web_search) for the agent, and agent egress's model.serverTools does not allow web_search"},
		{"kind listed", call("egress", map[string]any{"kind": "web_fetch", "type": "web_fetch_20250910", "name": "web_fetch"}), true, model.RuleAllow, ""},
		{"on the egress allowlist", call("egress", mcp("wiki.corp.example:443")), true, model.RuleAllow, ""},
		{"IDN host on it", call("egress", mcp("wiki.bücher.corp.example:443")), true, model.RuleAllow, ""},
		{"off it", call("egress", mcp("corp.example:443")), false, model.RuleConnectors, "corp.example:443 is not among agent egress's connectors (*.corp.example:443)"},
		{"connectors replace the egress allowlist", call("own", mcp("wiki.corp.example:443")), false, model.RuleConnectors, "(mcp.example.com:443)"},
		{"on the connectors", call("own", mcp("mcp.example.com:443")), true, model.RuleAllow, ""},
		{"no egress, no connectors", call("none", mcp("mcp.example.com:443")), false, model.RuleConnectors, "connectors (none)"},
		{"by id", call("egress", map[string]any{"kind": "mcp", "type": "mcp", "name": "mail", "connector": "connector_gmail"}), false, model.RuleConnectors, "reached by id (connector_gmail)"},
		{"a bad host on the record", call("egress", mcp("a b:443")), false, model.RuleConnectors, ""},
	} {
		d := e.Decide(c.call)
		if d.Allow != c.allow || d.Rule != c.rule || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("%s: %+v", c.name, d)
		}
	}
}
