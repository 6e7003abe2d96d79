package gateway

import (
	"encoding/json"
	"time"
)

// Phase of an audit entry: an allowed call is written twice — its decision,
// durable before it runs, and its result when it ends. A denied call once.
const (
	PhaseDecision = "decision"
	PhaseResult   = "result"
	// PhaseAsk is written, durably, before a call waits for a person; the
	// decision entry that follows holds the answer.
	PhaseAsk = "ask"
)

// Detail keys that tie a call to the model call that asked for it: a model
// call's result lists the tool_use ids its answer emitted; a hook, MCP or
// transcript entry names the tool_use id it carries out (a hint from the
// agent, like a parent).
const (
	DetailToolUseIDs = "toolUseIds"
	DetailToolUseID  = "tool_use_id"
)

// Entry is one audit line. Field order is the order on disk; Prev and Hash are
// filled by the audit writer, which owns the chain.
type Entry struct {
	TS         time.Time       `json:"ts"`
	ID         string          `json:"id"`
	Phase      string          `json:"phase"`
	Agent      string          `json:"agent"`
	Type       Kind            `json:"type"`
	Tool       string          `json:"tool"`
	Via        string          `json:"via,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Decision   string          `json:"decision"`
	Rule       string          `json:"rule,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	DurationMs *float64        `json:"durationMs,omitempty"`
	ExitCode   *int            `json:"exitCode,omitempty"`
	Error      string          `json:"error,omitempty"`
	Session    string          `json:"session,omitempty"`
	Parent     string          `json:"parent,omitempty"`
	Detail     map[string]any  `json:"detail,omitempty"`
	Prev       string          `json:"prev"`
	Hash       string          `json:"hash"`
}
