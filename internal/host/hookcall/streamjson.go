package hookcall

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// Observation kinds: what a stream-json transcript shows.
const (
	ObsToolUse            = "tool_use"            // the model asked for a tool
	ObsToolResult         = "tool_result"         // the tool's result as the model got it
	ObsPermissionDecision = "permission_decision" // tool_result_meta: accept/reject and by whom
	ObsPermissionDenied   = "permission_denied"   // system/permission_denied
	ObsHookNoVerdict      = "hook_no_verdict"     // a hook failed open (informational warning)
	ObsPermissionDenial   = "permission_denial"   // result.permission_denials
	ObsToolDeferred       = "tool_deferred"       // result.deferred_tool_use
)

// DecisionObserved is the audit decision of every observation. It is
// neither "allow" nor "deny" on purpose: an observation is what a transcript
// claims, not something toolgate decided, so anything counting decisions
// (allow/deny) never counts it. The claim itself is in Detail["claimed"].
const DecisionObserved = gateway.VerdictObserved

// MaxStreamLine bounds one stream-json line; a longer one is an error.
const MaxStreamLine = 64 << 20

// Observation is one fact read from a transcript.
type Observation struct {
	// ID is stable across re-ingestion: derived from session, tool_use_id and
	// kind, so the same transcript read twice yields the same ids.
	ID        string
	Kind      string
	Session   string
	ToolUseID string
	Tool      string
	Parent    string          // parent_tool_use_id: the subagent call this ran under
	Input     json.RawMessage // tool_use input, denial tool_input
	IsError   bool            // tool_result
	Content   string          // tool_result text, denial message, warning text (cut)
	Claimed   string          // what the transcript says was decided: accept, reject, deny, no_verdict
	Source    string          // permission decision source: config, hook; hook event for no_verdict
	Reason    string          // reason_type / decision_reason_type / non_execution_kind
	TimedOut  bool            // hook_no_verdict
	Line      int             // 1-based line in the transcript
}

// Observed is the observation as the gateway records it: an entry of
// type observed whose verdict is DecisionObserved (see there). Its ID is the
// observation's, so an index keyed by id absorbs re-ingestion.
func (o Observation) Observed(agent string) *gateway.Observation {
	g := &gateway.Observation{
		ID:      o.ID,
		Agent:   agent,
		Type:    gateway.KindObserved,
		Tool:    o.Tool,
		Via:     "ingest",
		Verdict: DecisionObserved,
		Session: o.Session,
		Detail:  map[string]any{"kind": o.Kind, "line": o.Line},
	}
	if len(o.Input) > 0 {
		g.Args = hooks.AuditArgs(o.Tool, o.Input)
	}
	if o.IsError {
		g.Error = o.Content
	} else {
		setDetail(g.Detail, "content", o.Content)
	}
	setDetail(g.Detail, "tool_use_id", o.ToolUseID)
	setDetail(g.Detail, "parent_tool_use_id", o.Parent)
	setDetail(g.Detail, "claimed", o.Claimed)
	setDetail(g.Detail, "source", o.Source)
	setDetail(g.Detail, "reason", o.Reason)
	if o.TimedOut {
		g.Detail["timed_out"] = true
	}
	return g
}

// streamEvent is the union of the stream-json events toolgate reads; the
// rest of each event is ignored.
type streamEvent struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Parent    string `json:"parent_tool_use_id"`
	// An API message for assistant/user events, a string for permission_denied.
	Message        json.RawMessage `json:"message"`
	ToolResultMeta []struct {
		ID                 string `json:"id"`
		NonExecutionKind   string `json:"non_execution_kind"`
		PermissionDecision *struct {
			Decision   string `json:"decision"`
			Source     string `json:"source"`
			ReasonType string `json:"reason_type"`
		} `json:"permission_decision"`
	} `json:"tool_result_meta"`
	// system/permission_denied
	ToolName           string `json:"tool_name"`
	ToolUseID          string `json:"tool_use_id"`
	DecisionReasonType string `json:"decision_reason_type"`
	// system/informational; message text is Content there, a string
	Tag           string `json:"tag"`
	HookNoVerdict *struct {
		HookEvent string `json:"hook_event"`
		ToolUseID string `json:"tool_use_id"`
		TimedOut  bool   `json:"timed_out"`
	} `json:"hook_no_verdict"`
	Text json.RawMessage `json:"content"`
	// result
	PermissionDenials []struct {
		ToolName  string          `json:"tool_name"`
		ToolUseID string          `json:"tool_use_id"`
		ToolInput json.RawMessage `json:"tool_input"`
	} `json:"permission_denials"`
	DeferredToolUse *struct {
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"deferred_tool_use"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"` // string or [{type:text,text}]
}

// ReadStreamJSON reads `claude -p --output-format stream-json --verbose`
// output and calls fn for every observation, in stream order. Unknown event
// types and lines that are not JSON objects of a known shape are skipped; a
// final line cut short (no newline, not JSON) is ignored, since a transcript
// of a killed run ends that way. A malformed complete line is an error with
// its line number. An error from fn stops reading and is returned.
func ReadStreamJSON(r io.Reader, fn func(Observation) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	toolNames := map[string]string{} // tool_use_id → tool name, for later events
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if err != nil && err != io.EOF {
			return fmt.Errorf("stream-json line %d: %w", lineNo, err)
		}
		last := err == io.EOF
		complete := bytes.HasSuffix(line, []byte("\n"))
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var ev streamEvent
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				if last && !complete {
					return nil // truncated tail of an interrupted run
				}
				var te *json.UnmarshalTypeError
				if !errors.As(jerr, &te) {
					return fmt.Errorf("stream-json line %d: not JSON: %v", lineNo, jerr)
				}
				// A known event with an unexpected field shape is skipped, not fatal.
			} else if ferr := observe(&ev, lineNo, toolNames, fn); ferr != nil {
				return ferr
			}
		}
		if last {
			return nil
		}
	}
}

// readLine returns one line including its newline, refusing lines longer
// than MaxStreamLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxStreamLine {
			return nil, fmt.Errorf("line longer than %d bytes", MaxStreamLine)
		}
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

func observe(ev *streamEvent, line int, toolNames map[string]string, fn func(Observation) error) error {
	emit := func(o Observation) error {
		o.Session, o.Line = ev.SessionID, line
		if o.Tool == "" {
			o.Tool = toolNames[o.ToolUseID]
		}
		o.ID = hooks.EventIDFor(o.Session, o.ToolUseID, o.Kind)
		return fn(o)
	}
	switch {
	case ev.Type == "assistant":
		for _, b := range blocks(ev.Message) {
			if b.Type != "tool_use" {
				continue
			}
			toolNames[b.ID] = b.Name
			if err := emit(Observation{Kind: ObsToolUse, ToolUseID: b.ID, Tool: b.Name, Parent: ev.Parent, Input: b.Input}); err != nil {
				return err
			}
		}
	case ev.Type == "user":
		for _, b := range blocks(ev.Message) {
			if b.Type != "tool_result" {
				continue
			}
			o := Observation{Kind: ObsToolResult, ToolUseID: b.ToolUseID, Parent: ev.Parent, IsError: b.IsError, Content: text(b.Content)}
			if err := emit(o); err != nil {
				return err
			}
		}
		for _, m := range ev.ToolResultMeta {
			if m.PermissionDecision == nil {
				continue
			}
			o := Observation{Kind: ObsPermissionDecision, ToolUseID: m.ID, Parent: ev.Parent,
				Claimed: m.PermissionDecision.Decision, Source: m.PermissionDecision.Source,
				Reason: firstNonEmpty(m.NonExecutionKind, m.PermissionDecision.ReasonType)}
			if err := emit(o); err != nil {
				return err
			}
		}
	case ev.Type == "system" && ev.Subtype == "permission_denied":
		return emit(Observation{Kind: ObsPermissionDenied, ToolUseID: ev.ToolUseID, Tool: ev.ToolName,
			Claimed: "deny", Reason: ev.DecisionReasonType, Content: text(ev.Message)})
	case ev.Type == "system" && ev.Subtype == "informational" && ev.Tag == "hook_no_verdict" && ev.HookNoVerdict != nil:
		v := ev.HookNoVerdict
		// One hook event can fail open for the same tool call pre and post.
		return emit(Observation{Kind: ObsHookNoVerdict + ":" + v.HookEvent, ToolUseID: v.ToolUseID,
			Claimed: "no_verdict", Source: v.HookEvent, TimedOut: v.TimedOut, Content: text(ev.Text)})
	case ev.Type == "result":
		for _, d := range ev.PermissionDenials {
			if err := emit(Observation{Kind: ObsPermissionDenial, ToolUseID: d.ToolUseID, Tool: d.ToolName, Claimed: "deny", Input: d.ToolInput}); err != nil {
				return err
			}
		}
		if d := ev.DeferredToolUse; d != nil {
			return emit(Observation{Kind: ObsToolDeferred, ToolUseID: d.ID, Tool: d.Name, Claimed: "defer", Input: d.Input})
		}
	}
	return nil
}

// blocks decodes an API message's content blocks; a plain string content
// (a user prompt) has none.
func blocks(message json.RawMessage) []contentBlock {
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	var bs []contentBlock
	if json.Unmarshal(message, &m) != nil || json.Unmarshal(m.Content, &bs) != nil {
		return nil
	}
	return bs
}

// text flattens a string or a list of text blocks, cut for the audit.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return hooks.CutString(s, hooks.DetailStringLimit)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return hooks.CutString(b.String(), hooks.DetailStringLimit)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
