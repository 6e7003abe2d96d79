// Package replay re-decides recorded calls under a candidate policy: the
// decision entries of the audit log are turned back into calls, prepared by
// the same tools and decided by the candidate snapshot's Decider, and every
// verdict or rule that would change is reported. Nothing runs.
//
// A replay sees what the log kept. Arguments are bounded when recorded
// (long strings cut, file bodies become byte counts): bodies are restored to
// their recorded size, and a call whose arguments were cut is decided on
// what is left and marked Approximate.
package replay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/hookcall"
	"github.com/toolgate/toolgate/internal/host/netrule"
	"github.com/toolgate/toolgate/internal/host/session"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// Outcome is one recorded decision beside the candidate's.
type Outcome struct {
	ID          string           `json:"id"`
	TS          time.Time        `json:"ts"`
	Agent       string           `json:"agent"`
	Kind        gateway.Kind     `json:"type"`
	Tool        string           `json:"tool"`
	Was         gateway.Decision `json:"was"`
	Now         gateway.Decision `json:"now"`
	Approximate bool             `json:"approximate,omitempty"` // its recorded arguments were cut
}

// Change classifies an outcome.
func (o Outcome) Change() string {
	switch {
	case o.Now.Ask && o.Was.Rule == o.Now.Rule:
		return "" // a person decided, as the candidate would have them do
	case o.Now.Ask:
		return "→ask"
	case o.Was.Allow && !o.Now.Allow:
		return "allowed→denied"
	case !o.Was.Allow && o.Now.Allow:
		return "denied→allowed"
	case o.Was.Rule != o.Now.Rule:
		return "rule changed"
	}
	return ""
}

// Summary counts a replay.
type Summary struct {
	Replayed        int `json:"replayed"`
	Same            int `json:"same"`
	AllowedToDenied int `json:"allowed_to_denied"`
	DeniedToAllowed int `json:"denied_to_allowed"`
	RuleChanged     int `json:"rule_changed"`
	ToAsk           int `json:"to_ask"` // would now wait for a person
	Approximate     int `json:"approximate"`
	Skipped         int `json:"skipped"` // not decisions policy makes (admin refusals, observations, results)
}

// Add counts one outcome.
func (s *Summary) Add(o Outcome) {
	s.Replayed++
	if o.Approximate {
		s.Approximate++
	}
	switch o.Change() {
	case "":
		s.Same++
	case "allowed→denied":
		s.AllowedToDenied++
	case "denied→allowed":
		s.DeniedToAllowed++
	case "→ask":
		s.ToAsk++
	default:
		s.RuleChanged++
	}
}

// Replayable reports whether an entry records a decision policy can make
// again: a decision-phase entry of a call kind, not a refusal at a door.
func Replayable(e *gateway.Entry) bool {
	if e.Phase != gateway.PhaseDecision {
		return false
	}
	switch e.Type {
	case gateway.KindAdmin, gateway.KindObserved:
		return false
	}
	return e.Decision == "allow" || e.Decision == "deny"
}

// Decide re-decides one replayable entry under snap. With sessions, the
// call is decided on what its session was given by the calls replayed
// before it, and gives its own labels when the candidate allows it.
func Decide(snap *gateway.Snapshot, sessions gateway.Sessions, e *gateway.Entry) Outcome {
	o := Outcome{ID: e.ID, TS: e.TS, Agent: e.Agent, Kind: e.Type, Tool: e.Tool,
		Was: gateway.Decision{Allow: e.Decision == "allow", Rule: e.Rule, Reason: e.Reason}}
	o.Approximate = cutMarker().Match(e.Args)
	call, refused := Call(snap, e, func(c *gateway.Call) {
		if sessions != nil {
			c.SessionFacts = sessions.Facts(c)
		}
	})
	if refused != nil {
		o.Now = *refused
		return o
	}
	o.Now = snap.Decider.Decide(call)
	o.Now.Shadow = nil
	if sessions != nil && o.Now.Allow {
		sessions.Give(call, o.Now)
	}
	return o
}

// Call turns a recorded decision entry back into the call it was, with
// the facts policy saw filled as the live call's tool filled them
// (before, then, is given the call to add what it must before the tool
// prepares it). A non-nil Decision is the call refused before policy.
func Call(snap *gateway.Snapshot, e *gateway.Entry, before func(*gateway.Call)) (*gateway.Call, *gateway.Decision) {
	call := &gateway.Call{ID: e.ID, Agent: e.Agent, Kind: e.Type, Tool: e.Tool, Args: restoreBodies(e.Args),
		Session: e.Session, Parent: e.Parent, Via: e.Via, Detail: maps.Clone(e.Detail)}
	for _, k := range []string{"shadow", "labels", "target"} {
		delete(call.Detail, k) // what the decision gave, not what the call was
	}
	if call.Kind == gateway.KindHook {
		// Facts of a hook call come from Claude Code's input, as at the gate.
		hc, err := hookcall.ToCall(&hooks.Input{HookEventName: hooks.EventPreToolUse, ToolName: e.Tool,
			ToolInput: call.Args, Cwd: str(e.Detail["cwd"]), SessionID: e.Session}, proto.WorkspacePath)
		if err != nil {
			return nil, &gateway.Decision{Rule: "args.invalid", Reason: err.Error()}
		}
		hc.Agent, hc.ID = e.Agent, e.ID
		call = hc
	}
	if before != nil {
		before(call)
	}
	if call.Kind == gateway.KindEgress {
		// Not prepared again: that would resolve the name anew. The
		// addresses the live decision saw are in the entry's detail.
		if refused := prepareEgress(snap, call); refused != nil {
			return nil, refused
		}
		return call, nil
	}
	if _, refused := gateway.Prepare(snap, call); refused != nil {
		return nil, refused
	}
	return call, nil
}

// prepareEgress fills an egress call's facts from its record.
func prepareEgress(snap *gateway.Snapshot, call *gateway.Call) *gateway.Decision {
	if _, ok := snap.Agents[call.Agent]; !ok {
		return &gateway.Decision{Rule: "agent.unknown", Reason: "unknown agent " + call.Agent}
	}
	var a struct {
		Target string `json:"target"`
	}
	_ = json.Unmarshal(call.Args, &a)
	t, err := netrule.ParseTarget(a.Target)
	if err != nil {
		return &gateway.Decision{Rule: "args.invalid", Reason: err.Error()}
	}
	call.Host, call.Port = t.Host, int(t.Port)
	if call.Egress, err = netrule.RecordedFacts(call.Detail); err != nil {
		return &gateway.Decision{Rule: netrule.RuleResolve, Reason: err.Error()}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// cutMarker finds the bounding markers of internal/host/audit and gateway.Cut.
var cutMarker = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`…\[cut \d+ (bytes|items)\]|\[cut \d+ keys\]|…\[depth limit`)
})

// maxRestore caps a restored body: far above any configured write limit,
// so a body refused for its size is refused again.
const maxRestore = 1 << 30

// restoreBodies turns the {"bytes":N} a recorded body became back into N
// bytes, so the tool's own checks (sizes, required fields) see what the
// live call had.
func restoreBodies(args json.RawMessage) json.RawMessage {
	if !bytes.Contains(args, []byte(`"bytes"`)) {
		return args
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return args
	}
	changed := false
	for k, v := range m {
		var sized struct {
			Bytes *int `json:"bytes"`
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if !bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) || dec.Decode(&sized) != nil || sized.Bytes == nil {
			continue
		}
		n := min(max(*sized.Bytes, 0), maxRestore)
		if string(m["encoding"]) == `"base64"` {
			m[k], _ = json.Marshal(base64.StdEncoding.EncodeToString(make([]byte, n)))
		} else {
			m[k], _ = json.Marshal(strings.Repeat("x", n))
		}
		changed = true
	}
	if !changed {
		return args
	}
	out, err := json.Marshal(m)
	if err != nil {
		return args
	}
	return out
}

// Log replays every replayable entry of the audit log in dir that f
// selects, oldest first, calling each for every outcome. Session labels
// are given afresh by the candidate's own decisions, from the first entry
// replayed: a window that starts mid-session starts its labels there.
func Log(dir string, f audit.Filter, snap *gateway.Snapshot, each func(Outcome) error) (Summary, error) {
	var s Summary
	sessions := session.New()
	err := audit.Query(dir, f, func(e *gateway.Entry) error {
		if !Replayable(e) {
			s.Skipped++
			return nil
		}
		o := Decide(snap, sessions, e)
		s.Add(o)
		return each(o)
	})
	return s, err
}
