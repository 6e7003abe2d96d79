package hooks

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Hook event names as Claude Code sends them in hook_event_name.
const (
	EventPreToolUse         = "PreToolUse"
	EventPostToolUse        = "PostToolUse"
	EventPostToolUseFailure = "PostToolUseFailure"
	EventPermissionRequest  = "PermissionRequest"
	EventPermissionDenied   = "PermissionDenied"
)

// toolEvents carry a tool call; knownEvents is every event the CLI documents.
// An unknown name is refused rather than guessed at: a gate that misreads
// its input must fail closed.
var (
	toolEvents = map[string]bool{
		EventPreToolUse: true, EventPostToolUse: true, EventPostToolUseFailure: true,
		EventPermissionRequest: true, EventPermissionDenied: true,
	}
	knownEvents = map[string]bool{
		EventPreToolUse: true, EventPostToolUse: true, EventPostToolUseFailure: true,
		EventPermissionRequest: true, EventPermissionDenied: true,
		"UserPromptSubmit": true, "SessionStart": true, "SessionEnd": true, "Stop": true,
		"SubagentStart": true, "SubagentStop": true, "Notification": true,
		"PreCompact": true, "PostCompact": true, "StopFailure": true, "Setup": true,
		"TeammateIdle": true, "TaskCreated": true, "TaskCompleted": true,
		"ConfigChange": true, "InstructionsLoaded": true, "CwdChanged": true,
		"FileChanged": true, "WorktreeCreate": true, "WorktreeRemove": true,
		"Elicitation": true, "ElicitationResult": true,
	}
	// needsToolUseID: the events a gate decides and a tap records are linked
	// by tool_use_id; PermissionRequest has none (Verified).
	needsToolUseID = map[string]bool{
		EventPreToolUse: true, EventPostToolUse: true, EventPostToolUseFailure: true,
	}
)

// DefaultMaxInput bounds one hook input when ParseInput is given max <= 0.
// A Write of a larger file is refused by the gate (fail closed), not cut.
const DefaultMaxInput = 8 << 20

// Errors from ParseInput; test with errors.Is.
var (
	ErrEmpty        = errors.New("hook input is empty")
	ErrNotJSON      = errors.New("hook input is not a JSON object")
	ErrTooLarge     = errors.New("hook input too large")
	ErrMissingField = errors.New("hook input lacks a required field")
	ErrWrongType    = errors.New("hook input field has the wrong type")
	ErrUnknownEvent = errors.New("unknown hook event")
)

// MCPServer is the mcp_server object sent for MCP tools.
type MCPServer struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// Input is one hook input object. Fields the CLI may add later are ignored;
// the ones toolgate relies on are checked by ParseInput.
type Input struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	PromptID       string `json:"prompt_id"`
	PermissionMode string `json:"permission_mode"`
	AgentID        string `json:"agent_id"`
	AgentType      string `json:"agent_type"`
	HookEventName  string `json:"hook_event_name"`

	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	ToolUseID string          `json:"tool_use_id"`
	MCPServer *MCPServer      `json:"mcp_server"`

	// Post events.
	ToolResponse json.RawMessage `json:"tool_response"` // PostToolUse
	Error        string          `json:"error"`         // PostToolUseFailure
	IsInterrupt  bool            `json:"is_interrupt"`
	DurationMs   *float64        `json:"duration_ms"`
}

// IsToolEvent reports whether the input describes a tool call.
func (in *Input) IsToolEvent() bool { return toolEvents[in.HookEventName] }

// ParseInput reads exactly one hook input object (at most max bytes; max <= 0
// means DefaultMaxInput) and checks what toolgate needs: a known
// hook_event_name and, for tool events, tool_name, an object tool_input and
// (PreToolUse/PostToolUse/PostToolUseFailure) tool_use_id.
func ParseInput(r io.Reader, max int64) (*Input, error) {
	if max <= 0 {
		max = DefaultMaxInput
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading hook input: %w", err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	return parseInputBytes(data)
}

func parseInputBytes(data []byte) (*Input, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, ErrEmpty
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, ErrNotJSON
	}
	var in Input
	if err := json.Unmarshal(trimmed, &in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%w: %s is %s", ErrWrongType, te.Field, te.Value)
		}
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if in.HookEventName == "" {
		return nil, fmt.Errorf("%w: hook_event_name", ErrMissingField)
	}
	if !knownEvents[in.HookEventName] {
		return nil, fmt.Errorf("%w %q", ErrUnknownEvent, in.HookEventName)
	}
	if !in.IsToolEvent() {
		return &in, nil
	}
	if in.ToolName == "" {
		return nil, fmt.Errorf("%w: tool_name", ErrMissingField)
	}
	if len(in.ToolInput) == 0 {
		return nil, fmt.Errorf("%w: tool_input", ErrMissingField)
	}
	if in.ToolInput[0] != '{' {
		return nil, fmt.Errorf("%w: tool_input must be an object", ErrWrongType)
	}
	if needsToolUseID[in.HookEventName] && in.ToolUseID == "" {
		return nil, fmt.Errorf("%w: tool_use_id", ErrMissingField)
	}
	return &in, nil
}

// EventID is the stable id of a hook event: the same event delivered again
// (a retried tap, a drained spool) has the same id, so delivery is idempotent.
func EventID(in *Input) string {
	return EventIDFor(in.SessionID, in.ToolUseID, in.HookEventName)
}

// EventIDFor derives ids for hook events and transcript observations alike.
func EventIDFor(session, toolUseID, kind string) string {
	h := sha256.New()
	for _, s := range []string{session, toolUseID, kind} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
