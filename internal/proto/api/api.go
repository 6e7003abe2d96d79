// Package api holds the admin API's shapes: what the CLI sends to a running
// gateway and what the gateway answers — agents, calls and their results,
// streamed frames, errors, approvals, audit entries. The servers (the admin
// API, the dashboard, the wire framing) and the client (cli/adminclient)
// both import it, so a server never imports its own client and the thin
// CLI never links the host. It imports nothing of ours.
package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Where a home's admin API is, and the CLI's token for it.
const (
	SocketName = "admin.sock"  // the admin socket inside the toolgate home
	TokenFile  = "admin.token" // the admin token the CLI presents (0600)
)

// Media types and headers of the admin API.
const (
	// MediaNDJSON asks for a streamed response: one Frame per line.
	MediaNDJSON = "application/x-ndjson"
	// MediaRaw is a call's Content-Type when its body is raw input bytes
	// and its arguments are the JSON in ArgsHeader.
	MediaRaw = "application/octet-stream"
	// ArgsHeader carries a raw call's arguments (a JSON object).
	ArgsHeader = "Toolgate-Args"
	// ResultTrailer ends a raw answer (Accept: MediaRaw) with its outcome.
	ResultTrailer = "Toolgate-Result"
)

// Error is the body of every failed request and the error frame of a stream.
type Error struct {
	Code    string `json:"code"` // denied, unauthorized, bad_request, not_found, tool_error, unavailable …
	Message string `json:"message"`
	Rule    string `json:"rule,omitempty"`
	ID      string `json:"id,omitempty"` // the audit id of the call, when there is one
}

func (e *Error) Error() string {
	if e.Rule != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Rule, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Frame is one line of a streamed response. Exactly one field is set.
type Frame struct {
	Stdout []byte  `json:"stdout,omitempty"`
	Stderr []byte  `json:"stderr,omitempty"`
	Result *Result `json:"result,omitempty"`
	Error  *Error  `json:"error,omitempty"`
}

// Result is what a finished call returns.
type Result struct {
	ExitCode *int `json:"exitCode,omitempty"`
	// Output is the tool-specific result body (read text, exec output …).
	Output any    `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
}

// AgentStatus is one row of `toolgate agents`.
type AgentStatus struct {
	Agent     string    `json:"agent"`
	Container string    `json:"container"`
	Image     string    `json:"image"`
	State     string    `json:"state"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	Calls     uint64    `json:"calls"`
	Denials   uint64    `json:"denials"`
	Error     string    `json:"error,omitempty"`
	Waiting   int       `json:"waiting,omitempty"` // calls waiting for their turn in the sandbox
}

// EvalRequest asks the daemon's policy for a dry-run decision.
type EvalRequest struct {
	Agent string          `json:"agent"`
	Tool  string          `json:"tool"`
	Args  json.RawMessage `json:"args"`
}

// Observed is the daemon's count of a transcript's observations.
type Observed struct{ Recorded, Duplicates int }

// Identity is who a gateway is to the world (GET /v1/identity, toolgate
// id): the origin of its log and the verifier keys its checkpoints and
// receipts are checked with, the current one first.
type Identity struct {
	Origin  string   `json:"origin"`
	Key     string   `json:"key"`
	OldKeys []string `json:"oldKeys,omitempty"`
}

// Checkpointed is POST /v1/audit/checkpoint's answer: a checkpoint of the
// audit log signed now, covering every entry written before it (a signed
// note, C2SP tlog-checkpoint).
type Checkpointed struct {
	Checkpoint string `json:"checkpoint"`
}

// Reindexed is the daemon's account of an audit index rebuilt.
type Reindexed struct {
	Entries int   `json:"entries"`
	Millis  int64 `json:"millis"`
}
