package gateway

import (
	"strconv"

	"github.com/toolgate/toolgate/internal/proto/api"
)

// Sessions keeps what the calls of each session gave it — labels such as
// private, untrusted, external, each with the call that first gave it —
// so policy can decide a call on the sequence it ends (the lethal
// trifecta: private data read, untrusted content taken in, then a way
// out). Facts is read after a call is prepared and before it is decided;
// Give once its decision is allowed and on record, so a call that was
// denied, or whose decision could not be recorded, gives nothing.
// Both must be quick and must not block on I/O.
//
// Sessions also hold the budgets of tasks: Charge counts an allowed call
// against its task's caps before its decision is recorded and returns
// settle, to call once the call has run (ran false: it never did — a rate
// limit or the audit refused it — and counts nothing); at a cap it returns an ask (rule
// session.budget.*) instead, and a person answering it may Raise the caps
// (force then charges the call they approved).
type Sessions interface {
	Facts(call *Call) *SessionFacts
	// Give reports whether the call's agent got a label it did not have.
	Give(call *Call, dec Decision) (changed bool)
	Charge(call *Call, force bool) (settle func(ran bool), over *Decision)
	Raise(call *Call, caps string) error
}

// SessionFacts are what a call's session and agent had been given before
// it: the one session its hint names (the agent's unnamed one without a
// hint) and every session of the agent. Policy reads one of the two as
// `session`, by the agent's scope. The maps are shared and never written:
// a new label replaces a scope's map.
type SessionFacts struct {
	ID     string           // the session hint, "" for the unnamed one
	Labels map[string]Label // label → the call that first gave it in this session
	Calls  int              // allowed calls of this session since the gateway started
	Cost   float64          // what its model calls cost (USD), settled
	Tokens int64            // their tokens
	Agent  ScopeFacts       // the same over every session of the agent
}

// ScopeFacts are the labels, calls and spending of one scope (every
// session of an agent).
type ScopeFacts struct {
	Labels map[string]Label
	Calls  int
	Cost   float64
	Tokens int64
}

// Label is where a label came from: the call that gave it first (api.Label).
type Label = api.Label

// Target is what a call reached, for a person reading where a label came
// from: the path, the host:port, the model, else the command.
func (c *Call) Target() string {
	switch {
	case c.Path != "":
		return c.Path
	case c.Host != "":
		return c.Host + ":" + strconv.Itoa(c.Port)
	case c.Model != nil && c.Model.Name != "":
		return c.Model.Name
	}
	return c.Command
}
