package hooks

import (
	"github.com/toolgate/toolgate/internal/proto"
)

// ReasonLimit bounds the reason shown to the model; the audit keeps the rule.
const ReasonLimit = 2000

// preToolUseOutput is the only shape the CLI honours for a PreToolUse
// decision (reference §4, §8): a flat permissionDecision, continue:false or a
// missing hookEventName are silently ignored and the tool runs.
type preToolUseOutput struct {
	HookSpecificOutput struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
	} `json:"hookSpecificOutput"`
}

// RenderPreToolUse returns the gate's whole stdout for a decision: exactly one
// JSON object with an explicit "allow" or "deny" (silence would not be an
// allow, it defers to the permission system) and a trailing newline. The
// process then exits 0. A deny always carries a reason, so the model is told
// more than "Blocked by hook".
func RenderPreToolUse(dec proto.GateAnswer) []byte {
	var out preToolUseOutput
	out.HookSpecificOutput.HookEventName = EventPreToolUse
	out.HookSpecificOutput.PermissionDecision = permissionDecision(dec)
	out.HookSpecificOutput.PermissionDecisionReason = reason(dec)
	return append(marshal(out), '\n')
}

// Reply is a complete hook answer: what to print on each stream and the
// process exit code.
type Reply struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// ReplyPreToolUse answers a decision in the chosen form. With exit2 a deny is
// the reason on stderr and exit code 2, stdout empty (the CLI ignores stdout
// on exit 2); an allow is always the JSON object, exit 0, since no exit code
// means allow.
func ReplyPreToolUse(dec proto.GateAnswer, exit2 bool) Reply {
	if exit2 && !dec.Allow {
		return Reply{Stderr: []byte(reason(dec) + "\n"), ExitCode: 2}
	}
	return Reply{Stdout: RenderPreToolUse(dec)}
}

// DenyInternal is the fail-closed decision for anything that kept the gate
// from getting a real one: bad input, an unreachable or slow gateway, a bug.
func DenyInternal(err error) proto.GateAnswer {
	msg := "unknown error"
	if err != nil {
		msg = err.Error()
	}
	return proto.GateAnswer{Rule: "hook.internal", Reason: "toolgate gate failed closed: " + msg}
}

// reason is the text the model sees: the policy's reason, or for a deny
// without one the rule that decided, never empty.
func reason(dec proto.GateAnswer) string {
	r := dec.Reason
	if r == "" && !dec.Allow {
		r = "denied by toolgate policy"
		if dec.Rule != "" {
			r += " (" + dec.Rule + ")"
		}
	}
	return CutString(r, ReasonLimit)
}

// permissionDecision is Claude Code's name for the answer.
func permissionDecision(a proto.GateAnswer) string {
	switch {
	case a.Ask:
		return "ask"
	case a.Allow:
		return "allow"
	}
	return "deny"
}
