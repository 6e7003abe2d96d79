package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/model"
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
	e := engine(t, modelYAML)
	replayed := map[string]any{}
	raw, _ := json.Marshal(model.Spent{Cost1d: 2.5})
	_ = json.Unmarshal(raw, &replayed)
	call := func(agent, provider, m string, maxTokens int, spent any) *gateway.Call {
		args, _ := json.Marshal(map[string]any{"provider": provider, "model": m, "max_tokens": maxTokens})
		return &gateway.Call{Agent: agent, Kind: gateway.KindModel, Tool: provider, Args: args,
			Detail: map[string]any{"model": m, "spent": spent}}
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
