package config

import (
	"slices"
	"testing"
	"time"
)

func TestModelConfigErrors(t *testing.T) {
	src := `gateway:
  models:
    anthropic: {api: anthropic, url: "https://user:pw@api.anthropic.com"}
    Bad: {api: gemini, url: "ftp://x", private: maybe, timeout: 0s, prices: {"[": {input: -1}}}
    local: {api: openai, url: "http://127.0.0.1:8000/v1?x=1"}
agents:
  demo:
    model: {providers: [anthropic, nope, anthropic], allow: ["["], maxBody: 0, budget: {tokensPerDay: -5}}
`
	got := parseErrors(t, src)
	for _, want := range []string{
		`c.yaml:3: gateway.models.anthropic.url: the URL carries credentials; put the key in a secret and name it in secret`,
		`c.yaml:4: gateway.models.Bad: provider names are 1-63 lowercase letters, digits, _ or -, starting with a letter or digit`,
		`c.yaml:4: gateway.models.Bad.api: "gemini": want anthropic or openai`,
		`c.yaml:4: gateway.models.Bad.url: "ftp://x": want an http or https URL`,
		`c.yaml:4: gateway.models.Bad.private: "maybe" is neither allow nor deny`,
		`c.yaml:4: gateway.models.Bad.timeout: must be greater than 0`,
		`c.yaml:4: gateway.models.Bad.prices["["]: "[" is not a valid pattern`,
		`c.yaml:4: gateway.models.Bad.prices["["]: prices must not be negative`,
		`c.yaml:5: gateway.models.local.url: "http://127.0.0.1:8000/v1?x=1": a base URL has no query or fragment`,
		`c.yaml:8: agents.demo.model.providers[1]: provider "nope" is not declared under gateway.models`,
		`c.yaml:8: agents.demo.model.providers[2]: "anthropic" is listed twice`,
		`c.yaml:8: agents.demo.model.allow[0]: "[" is not a valid pattern`,
		`c.yaml:8: agents.demo.model.maxBody: must be greater than 0`,
		`c.yaml:8: agents.demo.model.budget.tokensPerDay: must not be negative (0 or unset: no limit)`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing error %s\ngot:\n%s", want, joinLines(got))
		}
	}
}

// Server tools, connectors and pinned headers are checked where they are
// written.
func TestModelServerToolsConfig(t *testing.T) {
	src := `gateway:
  models:
    openai: {api: openai, url: "https://api.openai.com", headers: {OpenAI-Organization: org-1, "Bad Name": x, Authorization: "Bearer k", Content-Length: "1", X-Empty: ""}}
defaults:
  model: {providers: [openai], serverTools: [web_search], connectors: ["mcp.example.com:443"]}
agents:
  demo: {}
  bad:
    model: {providers: [openai], serverTools: [WebSearch, mcp, mcp], connectors: ["*:443", "mcp.example.com"]}
`
	got := parseErrors(t, src)
	for _, want := range []string{
		`c.yaml:3: gateway.models.openai.headers["Bad Name"]: "Bad Name" is not a header name`,
		`c.yaml:3: gateway.models.openai.headers.Authorization: Authorization is set by the door itself (credentials come from secret)`,
		`c.yaml:3: gateway.models.openai.headers.Content-Length: Content-Length is set by the door itself (credentials come from secret)`,
		`c.yaml:3: gateway.models.openai.headers.X-Empty: the value is empty or holds a line break`,
		`c.yaml:9: agents.bad.model.serverTools[0]: "WebSearch" is not a server tool kind (web_search, web_fetch, code_execution, mcp …)`,
		`c.yaml:9: agents.bad.model.serverTools[2]: "mcp" is listed twice`,
		`c.yaml:9: agents.bad.model.connectors[0]: egress rule "*:443": bare * would allow every host`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing error %s\ngot:\n%s", want, joinLines(got))
		}
	}
	if n := len(got); n != 8 {
		t.Errorf("%d errors:\n%s", n, joinLines(got))
	}

	cfg, err := Parse(t.TempDir(), "c.yaml", []byte(`gateway:
  models:
    openai: {api: openai, url: "https://api.openai.com", headers: {OpenAI-Organization: org-1}}
defaults:
  model: {providers: [openai], serverTools: [web_search], connectors: ["mcp.example.com:443"]}
agents:
  demo: {}
  own:
    model: {providers: [openai]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Agents["demo"].Model; !slices.Equal(m.ServerTools, []string{"web_search"}) || !slices.Equal(m.Connectors, []string{"mcp.example.com:443"}) {
		t.Fatalf("inherited %+v", m)
	}
	if m := cfg.Agents["own"].Model; m.ServerTools != nil || m.Connectors != nil {
		t.Fatalf("own %+v", m)
	}
	if h := cfg.Gateway.Models["openai"].Headers; h["OpenAI-Organization"] != "org-1" {
		t.Fatalf("headers %v", h)
	}
}

func TestModelConfigDefaults(t *testing.T) {
	src := `gateway:
  models:
    anthropic: {api: anthropic, url: "https://api.anthropic.com", secret: k, prices: {"claude-*": {input: 3, output: 15}}}
defaults:
  model: {providers: [anthropic], budget: {costPerDay: 5}}
agents:
  demo: {}
  own:
    model: {providers: [anthropic], maxBody: 1m}
`
	cfg, err := Parse(t.TempDir(), "c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Gateway.Models["anthropic"]
	if p.Kind != DefaultModelKind || p.Timeout != 10*time.Minute || p.Private != "deny" || p.Prices["claude-*"].Output != 15 {
		t.Fatalf("provider %+v", p)
	}
	if m := cfg.Agents["demo"].Model; m == nil || m.Budget.CostPerDay != 5 || m.MaxBody != DefaultModelMaxBody || !slices.Equal(m.Providers, []string{"anthropic"}) {
		t.Fatalf("inherited %+v", m)
	}
	if m := cfg.Agents["own"].Model; m.MaxBody != 1<<20 || m.Budget.CostPerDay != 0 {
		t.Fatalf("own %+v", m)
	}
}

func joinLines(ss []string) string {
	out := ""
	for _, s := range ss {
		out += s + "\n"
	}
	return out
}
