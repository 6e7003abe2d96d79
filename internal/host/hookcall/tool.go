package hookcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// DecisionReported is the audit decision of a tap entry: Claude Code
// reporting that a tool ran (or failed). Like DecisionObserved it is neither
// "allow" nor "deny": the gate's entry holds the decision, the tap's what
// happened after it.
const DecisionReported = gateway.VerdictReported

// Tool returns the one tool that serves every hook call; the daemon installs
// it as gateway.Snapshot.ByKind[gateway.KindHook]. ToCall has already filled
// the policy facts; Prepare refuses calls that did not come through it, and
// Run does nothing: Claude Code runs the tool, the decision is the product.
func Tool() gateway.Tool { return hookTool{} }

type hookTool struct{}

func (hookTool) Name() string       { return "hook" }
func (hookTool) Kind() gateway.Kind { return gateway.KindHook }

// Prepare checks that the facts ToCall derives are present, so a hook call
// made up by another entry point can never reach policy without them.
func (hookTool) Prepare(call *gateway.Call, _ gateway.AgentInfo) error {
	if call.Via != ViaHook {
		return errors.New("hook calls are accepted only from the hook gate")
	}
	switch pt, isFile := pathTools[call.Tool]; {
	case call.Tool == "Bash":
		if call.Command == "" {
			return fmt.Errorf("%w: Bash call without a command", hooks.ErrMissingField)
		}
	case isFile && !pt.optional:
		if !path.IsAbs(call.Path) {
			return fmt.Errorf("%w: %s call without an absolute path", hooks.ErrMissingField, call.Tool)
		}
	}
	return nil
}

func (hookTool) Run(context.Context, *gateway.Call, *gateway.RunEnv) (*gateway.Result, error) {
	return &gateway.Result{}, nil
}

// AuditArgs keeps file bodies as sizes, whichever tool sent them.
func (hookTool) AuditArgs(call *gateway.Call) json.RawMessage {
	return hooks.AuditArgsAnyTool(call.Args)
}
