package gateway

import "github.com/toolgate/toolgate/internal/proto/api"

// The phases an entry can be in (the admin API's vocabulary, shared with
// the CLI).
const (
	PhaseDecision = api.PhaseDecision
	PhaseResult   = api.PhaseResult
	PhaseAsk      = api.PhaseAsk
)

// Detail keys that tie a call to the model call that asked for it: a model
// call's result lists the tool_use ids its answer emitted; a hook, MCP or
// transcript entry names the tool_use id it carries out (a hint from the
// agent, like a parent).
const (
	DetailToolUseIDs = "toolUseIds"
	DetailToolUseID  = "tool_use_id"
)

// Entry is one audit line (api.Entry: the CLI reads the same shape). Prev
// and Hash are filled by the audit writer, which owns the chain.
type Entry = api.Entry
