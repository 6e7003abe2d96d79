package api

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Kind says what sort of call an entry describes; it is the audit entry's `type`.
type Kind string

const (
	KindCore     Kind = "core_tool" // read, write, patch, exec: act inside the sandbox
	KindTool     Kind = "tool"      // plugin tools: handler runs on the host
	KindHook     Kind = "hook"      // Claude Code hook gate/tap
	KindEgress   Kind = "egress"    // outbound connection through the proxy
	KindModel    Kind = "model"     // a model API request through the model door
	KindAdmin    Kind = "admin"     // admin API access (e.g. a refused token)
	KindObserved Kind = "observed"  // what a transcript claims; never a decision
	// KindCheckpoint is a signed checkpoint of the audit log's tree, which
	// the audit writer writes into the log itself; no call.
	KindCheckpoint Kind = "checkpoint"
)

// Kinds is every Kind, for checking a name given by a person.
var Kinds = []Kind{KindCore, KindTool, KindHook, KindEgress, KindModel, KindAdmin, KindObserved, KindCheckpoint}

// Phase of an audit entry: an allowed call is written twice — its decision,
// durable before it runs, and its result when it ends. A denied call once.
const (
	PhaseDecision = "decision"
	PhaseResult   = "result"
	// PhaseAsk is written, durably, before a call waits for a person; the
	// decision entry that follows holds the answer.
	PhaseAsk = "ask"
)

// Phases is every phase an entry can be in.
var Phases = []string{PhaseDecision, PhaseResult, PhaseAsk}

// The decisions an audit entry can carry: a policy's verdict, and those of
// the entries that record what happened rather than decide.
const (
	VerdictAllow    = "allow"
	VerdictDeny     = "deny"
	VerdictAsk      = "ask"
	VerdictReported = "reported" // Claude Code's tap: a tool ran
	VerdictObserved = "observed" // a transcript's claim
	VerdictSigned   = "signed"   // a checkpoint of the audit log
	VerdictCleared  = "cleared"  // a person cleared an agent's session labels
	VerdictActed    = "acted"    // a person stopped or removed a sandbox
)

// Verdicts is every decision an entry can carry.
var Verdicts = []string{VerdictAllow, VerdictDeny, VerdictAsk, VerdictReported, VerdictObserved, VerdictSigned, VerdictCleared, VerdictActed}

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

// NewID returns a time-ordered, random call id: sortable by creation, unguessable.
func NewID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixNano()))
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// IDTime is when NewID made id; false for an id it did not make.
func IDTime(id string) (time.Time, bool) {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 16 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b[:8]))), true
}
