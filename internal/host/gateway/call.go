// Package gateway holds the one pipeline every tool call goes through:
// identify → decide → execute → record. It depends only on the small
// interfaces declared here; Docker, CEL and the audit files live elsewhere.
package gateway

import (
	"encoding/json"
	"maps"
	"net/netip"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// Kind says what sort of call an entry describes; it is the audit entry's
// `type`. The names are the admin API's (api.Kind).
type Kind = api.Kind

const (
	KindCore     = api.KindCore     // read, write, patch, exec: act inside the sandbox
	KindTool     = api.KindTool     // plugin tools: handler runs on the host
	KindHook     = api.KindHook     // Claude Code hook gate/tap
	KindEgress   = api.KindEgress   // outbound connection through the proxy
	KindModel    = api.KindModel    // a model API request through the model door
	KindAdmin    = api.KindAdmin    // admin API access (e.g. a refused token)
	KindObserved = api.KindObserved // what a transcript claims; never a decision
	// KindCheckpoint is a signed checkpoint of the audit log's tree, which
	// the audit writer writes into the log itself; no call.
	KindCheckpoint = api.KindCheckpoint
)

// Kinds is every Kind, for checking a name given by a person.
var Kinds = api.Kinds

// ViaAdmin is the entry point of the operator's own calls (the admin API,
// behind an admin token): the only one trusted to ask for host secrets in
// a sandbox's environment.
const ViaAdmin = "admin"

// Call is one tool invocation. Agent is set by the entry point from the
// socket or token that carried the request, never from the payload.
type Call struct {
	ID      string          // assigned by the gateway
	Agent   string          // identity, from the transport
	Kind    Kind            // filled from the tool when empty
	Tool    string          // tool name
	Args    json.RawMessage // arguments as sent
	Session string          // correlation hint from the caller
	Parent  string          // correlation hint: the call that caused this one
	Via     string          // entry point: admin, socket, mcp, hook …

	// Facts resolved by the tool's Prepare before the decision; policy sees them.
	Path    string   // normalised absolute path as the sandbox sees it
	Command string   // exec: the shell command, when given as a string
	Argv    []string // exec or plugin argv
	Host    string   // egress
	Port    int      // egress
	// Egress and Model: the facts of an egress or a model call (nil for
	// other kinds). After Prepare the gateway puts them into Detail for
	// the record, where replay reads them back.
	Egress *EgressFacts
	Model  *ModelFacts
	// SessionFacts are what the call's session had been given before it
	// (Sessions.Facts), set by the gateway after Prepare; nil without
	// Sessions.
	SessionFacts *SessionFacts

	// Input is the call's whole standard input when a rule sent the call to
	// a person: read before they are asked (at most MaxAskInput bytes),
	// shown to them, bound by their approval, then given to the tool. Nil
	// for every other call (its input streams).
	Input []byte

	// Detail carries what the audit entry records beyond the call's
	// fields (peer credentials, timings, a hook's extras …). Keys are JSON
	// field names. Policy never reads it: what policy reads is typed
	// (the fields above, Egress, Model).
	Detail map[string]any

	// Prepared is the tool's own reading of Args, kept by its Prepare so Run
	// and AuditArgs need not decode a large body again. Tool-private.
	Prepared any
}

// EgressFacts are what policy reads of an egress call besides Host and
// Port: the answer the name resolved to, looked up once and only when the
// agent's allowlist admits the target (a name off the list is never
// looked up: DNS would be a channel out for names policy refuses).
type EgressFacts struct {
	Resolved     []netip.Addr
	ResolveError string // the lookup failed: policy refuses, naming it
}

// ModelFacts are what policy reads of a model call besides its
// arguments: the model asked for, the provider's API and what the agent
// had spent when the call was prepared, measured live or read back from
// the decision entry (replay).
type ModelFacts struct {
	Name  string
	API   string
	Spent *ModelSpent // nil: not known, so no budget can be checked
	// Reserve is the most the request can use (its output limit and its
	// body's input, estimated high, priced): a task's budget holds it
	// while the call runs, until Used — set by the door once the
	// answer's usage is known — says what it did use.
	Reserve ModelUse
	Used    *ModelUse
}

// ModelUse is tokens and their cost (USD; 0 for a model without a price).
type ModelUse struct {
	Tokens int64
	Cost   float64
}

// ModelSpent is what an agent has spent of its model budget.
type ModelSpent struct {
	Requests1m int     `json:"requests1m"`
	Tokens1h   int64   `json:"tokens1h"`
	Tokens1d   int64   `json:"tokens1d"`
	Cost1h     float64 `json:"cost1h"`
	Cost1d     float64 `json:"cost1d"`
	// RetryAfter is when the oldest request of the last minute leaves it.
	RetryAfter time.Duration `json:"retryAfterNs"`
}

// recordFacts puts the call's typed facts into its detail, where its
// entries and observers read them: one source for what policy saw and
// what is recorded.
func (c *Call) recordFacts() {
	if c.Egress == nil && c.Model == nil {
		return
	}
	c.Detail = maps.Clone(c.Detail)
	if c.Detail == nil {
		c.Detail = map[string]any{}
	}
	if e := c.Egress; e != nil {
		addrs := make([]string, len(e.Resolved))
		for i, a := range e.Resolved {
			addrs[i] = a.String()
		}
		c.Detail["resolved"] = addrs
		if e.ResolveError != "" {
			c.Detail["resolveError"] = e.ResolveError
		}
	}
	m := c.Model
	if m == nil {
		return
	}
	c.Detail["model"] = m.Name
	if m.API != "" {
		c.Detail["api"] = m.API // gen_ai.provider.name in traces
	}
	if m.Spent != nil {
		c.Detail["spent"] = *m.Spent
	}
}

// ArgsMap decodes Args for policy evaluation; non-object arguments yield nil.
func (c *Call) ArgsMap() map[string]any {
	var m map[string]any
	if len(c.Args) == 0 || json.Unmarshal(c.Args, &m) != nil {
		return nil
	}
	return m
}

// Decision is the outcome of policy for one call.
type Decision struct {
	Allow  bool   `json:"allow"`
	Rule   string `json:"rule"` // the rule that decided, e.g. "rules[2]" or "tools.allowlist"
	Reason string `json:"reason"`
	// Ask: a rule sends the call to a person; the gateway waits for an
	// answer and records the final allow or deny.
	Ask bool `json:"ask,omitempty"`
	// Shadow is what rules in shadow mode would have decided, when one of
	// them matched: recorded in the entry's detail, never enforced.
	Shadow *Shadow `json:"shadow,omitempty"`
	// Labels are what the call gives its session once allowed (the
	// agent's session.labels that match it): recorded in the entry's
	// detail, and given by Sessions.
	Labels []string `json:"labels,omitempty"`
	// Policy is the version of the policy that decided (its
	// configuration's digest), which an answer by link is bound to.
	Policy string `json:"policy,omitempty"`
}

// Shadow is the would-be decision of shadow-mode rules; the gate's answer
// carries it too (proto.Shadow).
type Shadow = proto.Shadow

// The decisions an audit entry can carry: Verdict's, and those of the
// entries that record what happened rather than decide (Observation).
const (
	VerdictAllow    = api.VerdictAllow
	VerdictDeny     = api.VerdictDeny
	VerdictAsk      = api.VerdictAsk
	VerdictReported = api.VerdictReported // Claude Code's tap: a tool ran
	VerdictObserved = api.VerdictObserved // a transcript's claim
	VerdictSigned   = api.VerdictSigned   // a checkpoint of the audit log
	VerdictCleared  = api.VerdictCleared  // a person cleared an agent's session labels
	VerdictActed    = api.VerdictActed    // a person stopped or removed a sandbox
)

// Verdicts is every decision an entry can carry; Phases every phase.
var (
	Verdicts = api.Verdicts
	Phases   = api.Phases
)

// Verdict renders the decision as it appears in the audit log.
func (d Decision) Verdict() string {
	switch {
	case d.Ask:
		return VerdictAsk
	case d.Allow:
		return VerdictAllow
	}
	return VerdictDeny
}

// NewID returns a time-ordered, random call id (api.NewID).
func NewID() string { return api.NewID() }
