package policy

import (
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/model"
)

// decideModel is the model door's part of policy for a prepared call: the
// call's tool is the provider, Detail holds the model asked for and what
// the agent had spent when the call was prepared (model.Spent). It is pure,
// so replay against the audit log reaches the same decision.
func decideModel(ap *agentPolicy, call *gateway.Call) gateway.Decision {
	m := ap.agent.Model
	if m == nil || !slices.Contains(m.Providers, call.Tool) {
		return gateway.Decision{Rule: model.RuleProvider, Reason: fmt.Sprintf("agent %s may not use model provider %q", ap.name, call.Tool)}
	}
	name, _ := call.Detail["model"].(string)
	if !model.Allowed(m.Allow, name) {
		return gateway.Decision{Rule: model.RuleAllow, Reason: fmt.Sprintf("model %q is not on agent %s's model allowlist", name, ap.name)}
	}
	if m.Budget != (model.Budget{}) {
		spent, ok := model.SpentOf(call.Detail["spent"])
		if !ok {
			return gateway.Decision{Rule: model.RuleTokens, Reason: "the call carries no record of what was spent, so the budget cannot be checked"}
		}
		if rule, reason, ok := m.Budget.Check(spent); !ok {
			return gateway.Decision{Rule: rule, Reason: reason}
		}
	}
	return gateway.Decision{Allow: true, Rule: model.RuleAllow, Reason: fmt.Sprintf("model %q of provider %s is allowed", name, call.Tool)}
}
