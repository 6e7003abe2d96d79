package model

import (
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Rule names of model decisions, as the audit entry's `rule` shows them.
const (
	RuleProvider = "model.provider" // the agent has no such provider
	RuleAllow    = "model.allowlist"
	RuleRPM      = "model.budget.requests"
	RuleTokens   = "model.budget.tokens"
	RuleCost     = "model.budget.cost"
	// A server tool of a kind the agent's serverTools does not name; an
	// MCP server not among its connectors.
	RuleServerTools = "model.server_tools"
	RuleConnectors  = "model.connectors"
)

// Budget is one agent's model budget; a zero field is no limit.
type Budget struct {
	RequestsPerMinute int     `json:"requestsPerMinute,omitempty" yaml:"requestsPerMinute"`
	TokensPerHour     int64   `json:"tokensPerHour,omitempty" yaml:"tokensPerHour"`
	TokensPerDay      int64   `json:"tokensPerDay,omitempty" yaml:"tokensPerDay"`
	CostPerHour       float64 `json:"costPerHour,omitempty" yaml:"costPerHour"`
	CostPerDay        float64 `json:"costPerDay,omitempty" yaml:"costPerDay"`
}

// Spent is what an agent used in the windows a Budget limits, as measured
// when its call was prepared. Recorded with the decision, it makes the
// decision reproducible from the audit log.
type Spent = gateway.ModelSpent

// Check decides one more request against the budget. A refusal names its
// rule and says what was spent of what.
func (b Budget) Check(s Spent) (rule, reason string, ok bool) {
	switch {
	case b.RequestsPerMinute > 0 && s.Requests1m >= b.RequestsPerMinute:
		return RuleRPM, fmt.Sprintf("%d model requests in the last minute reach the budget of %d per minute; retry in %s",
			s.Requests1m, b.RequestsPerMinute, s.RetryAfter.Round(time.Second)), false
	case b.TokensPerHour > 0 && s.Tokens1h >= b.TokensPerHour:
		return RuleTokens, fmt.Sprintf("%d tokens in the last hour reach the budget of %d per hour", s.Tokens1h, b.TokensPerHour), false
	case b.TokensPerDay > 0 && s.Tokens1d >= b.TokensPerDay:
		return RuleTokens, fmt.Sprintf("%d tokens in the last 24 hours reach the budget of %d per day", s.Tokens1d, b.TokensPerDay), false
	case b.CostPerHour > 0 && s.Cost1h >= b.CostPerHour:
		return RuleCost, fmt.Sprintf("$%.4f spent in the last hour reaches the budget of $%.2f per hour", s.Cost1h, b.CostPerHour), false
	case b.CostPerDay > 0 && s.Cost1d >= b.CostPerDay:
		return RuleCost, fmt.Sprintf("$%.4f spent in the last 24 hours reaches the budget of $%.2f per day", s.Cost1d, b.CostPerDay), false
	}
	return "", "", true
}
