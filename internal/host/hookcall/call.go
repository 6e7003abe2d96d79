package hookcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// ViaHook is the entry point name hook calls carry in Call.Via.
const ViaHook = "hook"

// ErrNoToolCall is returned by ToCall for events that carry no tool call.
var ErrNoToolCall = errors.New("hook event carries no tool call")

// pathTool says which tool_input field names the file a tool touches, and
// whether it may be absent (Glob/Grep then search the cwd).
type pathTool struct {
	field    string
	optional bool
}

var pathTools = map[string]pathTool{
	"Read":         {field: "file_path"},
	"Write":        {field: "file_path"},
	"Edit":         {field: "file_path"},
	"MultiEdit":    {field: "file_path"},
	"NotebookEdit": {field: "notebook_path"},
	"Glob":         {field: "path", optional: true},
	"Grep":         {field: "path", optional: true},
}

// ToCall maps a tool event onto the gateway's call model, so policy decides
// Claude Code's tools with the same rules as every other call:
//
//   - Kind hook, Via hook, Tool = Claude Code's tool name, Session = session_id;
//   - Args = tool_input, strings cut at PolicyStringLimit (audit bodies: AuditArgs);
//   - Bash: Command and Argv ["/bin/sh","-c",command], as the CLI runs it;
//   - file tools: Path, absolute and lexically clean, relative paths resolved
//     against cwd (or workspace when the input has no absolute cwd);
//   - MCP tools (mcp__server__tool): Detail mcp_server and mcp_tool;
//   - Detail always: event_id, tool_use_id, hook_event_name, cwd, permission_mode;
//     post events add tool_response (BoundResponse), error, is_interrupt, duration_ms.
//
// A tool_input that lacks or mistypes the field a fact comes from is an
// error: the gate must deny rather than let policy decide on missing facts.
func ToCall(in *hooks.Input, workspace string) (*gateway.Call, error) {
	if in == nil || !in.IsToolEvent() {
		return nil, ErrNoToolCall
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(in.ToolInput, &fields); err != nil {
		return nil, fmt.Errorf("%w: tool_input must be an object", hooks.ErrWrongType)
	}
	call := &gateway.Call{
		Kind:    gateway.KindHook,
		Tool:    in.ToolName,
		Args:    hooks.Bound(in.ToolInput, nil, hooks.PolicyStringLimit),
		Session: in.SessionID,
		Via:     ViaHook,
		Detail: map[string]any{
			"event_id":        hooks.EventID(in),
			"hook_event_name": in.HookEventName,
		},
	}
	setDetail(call.Detail, "tool_use_id", in.ToolUseID)
	setDetail(call.Detail, "cwd", in.Cwd)
	setDetail(call.Detail, "permission_mode", in.PermissionMode)

	switch pt, isFile := pathTools[in.ToolName]; {
	case in.ToolName == "Bash":
		cmd, err := stringField(fields, "command", false)
		if err != nil {
			return nil, err
		}
		call.Command = cmd
		call.Argv = []string{"/bin/sh", "-c", cmd}
	case isFile:
		p, err := stringField(fields, pt.field, pt.optional)
		if err != nil {
			return nil, err
		}
		if call.Path, err = resolve(p, in.Cwd, workspace); err != nil {
			return nil, err
		}
	case strings.HasPrefix(in.ToolName, "mcp__"):
		server, tool, err := splitMCP(in)
		if err != nil {
			return nil, err
		}
		call.Detail["mcp_server"] = server
		call.Detail["mcp_tool"] = tool
	}

	switch in.HookEventName {
	case hooks.EventPostToolUse:
		if len(in.ToolResponse) > 0 {
			call.Detail["tool_response"] = hooks.BoundResponse(in.ToolName, in.ToolResponse)
		}
	case hooks.EventPostToolUseFailure:
		call.Detail["error"] = hooks.CutString(in.Error, hooks.DetailStringLimit)
		call.Detail["is_interrupt"] = in.IsInterrupt
	}
	if in.DurationMs != nil {
		call.Detail["duration_ms"] = *in.DurationMs
	}
	return call, nil
}

func setDetail(d map[string]any, k, v string) {
	if v != "" {
		d[k] = v
	}
}

// stringField returns tool_input[name] as a string; absent is an error
// unless optional, any other JSON type always is.
func stringField(fields map[string]json.RawMessage, name string, optional bool) (string, error) {
	raw, ok := fields[name]
	if optional && (!ok || string(raw) == "null") {
		return "", nil
	}
	if !ok {
		return "", fmt.Errorf("%w: tool_input.%s", hooks.ErrMissingField, name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: tool_input.%s must be a string", hooks.ErrWrongType, name)
	}
	if s == "" && !optional {
		return "", fmt.Errorf("%w: tool_input.%s is empty", hooks.ErrMissingField, name)
	}
	return s, nil
}

// resolve makes p absolute against cwd (or workspace) and resolves ".."
// lexically; symlinks are the sandbox's business, not the hook's. Claude
// Code expands a leading "~" to the home directory, which the gateway does
// not know: taken as relative, "~/.ssh/id_rsa" would look to policy like a
// file inside the working directory, so such a path is refused.
func resolve(p, cwd, workspace string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return "", fmt.Errorf("%w: path %q is relative to the home directory; give an absolute path", hooks.ErrWrongType, p)
	}
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	base := cwd
	if !path.IsAbs(base) {
		base = workspace
	}
	if !path.IsAbs(base) {
		return "", fmt.Errorf("%w: relative path %q with no absolute cwd or workspace", hooks.ErrMissingField, p)
	}
	return path.Join(base, p), nil
}

// splitMCP names the server and tool of mcp__server__tool. The mcp_server
// object, when sent, settles server names that contain "__".
func splitMCP(in *hooks.Input) (server, tool string, err error) {
	rest := strings.TrimPrefix(in.ToolName, "mcp__")
	if in.MCPServer != nil && in.MCPServer.Name != "" {
		if t, ok := strings.CutPrefix(rest, in.MCPServer.Name+"__"); ok && t != "" {
			return in.MCPServer.Name, t, nil
		}
	}
	server, tool, ok := strings.Cut(rest, "__")
	if !ok || server == "" || tool == "" {
		return "", "", fmt.Errorf("%w: MCP tool name %q is not mcp__server__tool", hooks.ErrWrongType, in.ToolName)
	}
	return server, tool, nil
}
