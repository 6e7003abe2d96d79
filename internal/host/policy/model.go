package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// decideModel is the model door's part of policy for a prepared call: the
// call's tool is the provider, Call.Model holds the model asked for and
// what the agent had spent when the call was prepared, Args the
// server tools the request asks the provider to run. It is pure, so replay
// against the audit log reaches the same decision.
func decideModel(ap *agentPolicy, call *gateway.Call) gateway.Decision {
	m := ap.agent.Model
	if m == nil || !slices.Contains(m.Providers, call.Tool) {
		return gateway.Decision{Rule: model.RuleProvider, Reason: fmt.Sprintf("agent %s may not use model provider %q", ap.name, call.Tool)}
	}
	var facts gateway.ModelFacts
	if call.Model != nil {
		facts = *call.Model
	}
	name := facts.Name
	if !model.Allowed(m.Allow, name) {
		return gateway.Decision{Rule: model.RuleAllow, Reason: fmt.Sprintf("model %q is not on agent %s's model allowlist", name, ap.name)}
	}
	if d, ok := decideServerTools(ap, call); !ok {
		return d
	}
	if m.Budget != (model.Budget{}) {
		if facts.Spent == nil {
			return gateway.Decision{Rule: model.RuleTokens, Reason: "the call carries no record of what was spent, so the budget cannot be checked"}
		}
		if rule, reason, ok := m.Budget.Check(*facts.Spent); !ok {
			return gateway.Decision{Rule: rule, Reason: reason}
		}
	}
	return gateway.Decision{Allow: true, Rule: model.RuleAllow, Reason: fmt.Sprintf("model %q of provider %s is allowed", name, call.Tool)}
}

// decideServerTools refuses a server tool of a kind the agent's
// model.serverTools does not name, and an MCP server the agent may not
// reach: one named by URL whose host is not on its connectors, or one the
// provider reaches by id (a connector or tunnel), which no host rule can
// name.
func decideServerTools(ap *agentPolicy, call *gateway.Call) (gateway.Decision, bool) {
	var args struct {
		ServerTools []model.ServerTool `json:"server_tools"`
	}
	if len(call.Args) > 0 && json.Unmarshal(call.Args, &args) != nil {
		return gateway.Decision{Rule: model.RuleServerTools, Reason: "the call's server tools cannot be read"}, false
	}
	for _, t := range args.ServerTools {
		what := t.Type
		if t.Name != "" && t.Name != t.Type {
			what += " " + t.Name
		}
		if !slices.Contains(ap.agent.Model.ServerTools, t.Kind) {
			return gateway.Decision{Rule: model.RuleServerTools, Reason: fmt.Sprintf(
				"the request asks provider %s to run %s (kind %s) for the agent, and agent %s's model.serverTools does not allow %s",
				call.Tool, what, t.Kind, ap.name, t.Kind)}, false
		}
		switch {
		case t.Connector != "":
			return gateway.Decision{Rule: model.RuleConnectors, Reason: fmt.Sprintf(
				"MCP server %s is reached by id (%s), not by a URL agent %s's connectors could allow", what, t.Connector, ap.name)}, false
		case t.URL != "":
			target, err := netrule.ParseTarget(t.Host)
			if err != nil || !slices.ContainsFunc(ap.connectors, func(r netrule.Rule) bool { return r.Match(target) }) {
				return gateway.Decision{Rule: model.RuleConnectors, Reason: fmt.Sprintf(
					"MCP server %s at %s is not among agent %s's connectors (%s)", what, t.Host, ap.name, connectorList(ap))}, false
			}
		}
	}
	return gateway.Decision{}, true
}

func connectorList(ap *agentPolicy) string {
	if len(ap.connectors) == 0 {
		return "none"
	}
	s := make([]string, len(ap.connectors))
	for i, r := range ap.connectors {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}
