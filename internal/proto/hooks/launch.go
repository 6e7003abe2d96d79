package hooks

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// hookSkippingFlags make Claude Code ignore every hook in its settings
// (reference §1): a gated agent must never be started with them.
var hookSkippingFlags = []string{"--bare", "--safe-mode"}

// CheckLaunch refuses an argv that starts Claude Code with a flag that
// skips hooks. claude may come after a wrapper (env, timeout, npx …), so
// every word from the first one naming it (the claude binary, or the npm
// package @anthropic-ai/claude-code that npx runs) on is checked; flags
// given as --flag=value count too.
func CheckLaunch(argv []string) error {
	at := ClaudeAt(argv)
	if at < 0 {
		return nil
	}
	for _, a := range argv[at+1:] {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(a, "=")
		for _, f := range hookSkippingFlags {
			if name == f {
				return fmt.Errorf("refusing to run claude with %s: it skips the hooks that gate and record its tools", f)
			}
		}
	}
	return nil
}

// ClaudeAt is the index of the word in argv that starts Claude Code (the
// claude binary, or the npm package npx runs), -1 when there is none.
func ClaudeAt(argv []string) int {
	for i, a := range argv {
		if b := path.Base(a); b == "claude" || b == "claude-code" || strings.HasPrefix(b, "claude-code@") {
			return i
		}
	}
	return -1
}

// WithGate inserts `--settings <inline JSON>` registering the gate and the
// tap right after the word that starts Claude Code, unless argv already
// names settings. Inline, the settings live on claude's command line, not
// in a file the agent could edit. ok is false when nothing was inserted.
func WithGate(argv []string, gate GateCommand) (out []string, ok bool, err error) {
	at := ClaudeAt(argv)
	if at < 0 {
		return argv, false, nil
	}
	for _, a := range argv[at+1:] {
		if a == "--" {
			break
		}
		if name, _, _ := strings.Cut(a, "="); name == "--settings" {
			return argv, false, nil
		}
	}
	settings, err := MergeSettings(nil, gate)
	if err != nil {
		return nil, false, err
	}
	out = append(append(append([]string{}, argv[:at+1]...), "--settings", string(settings)), argv[at+1:]...)
	return out, true, nil
}

// DoorOnlyDisallowed are Claude Code's own actuators, switched off in
// door-only mode: each would act in the sandbox without toolgate's core
// tools (Agent/Task and Workflow run subagents that have them too).
var DoorOnlyDisallowed = []string{
	"Bash", "BashOutput", "KillShell", "Write", "Edit", "MultiEdit", "NotebookEdit",
	"Read", "Glob", "Grep", "LS", "WebFetch", "WebSearch", "Agent", "Task", "Workflow", "Skill",
}

// DoorServer is the MCP server name door-only mode gives toolgate: its
// tools reach Claude Code as mcp__toolgate__exec, mcp__toolgate__read …
const DoorServer = "toolgate"

// DoorOnly rewrites argv (which must start Claude Code) so that toolgate's
// gated tools are the only way it acts: its own actuators disallowed, and
// its MCP client connected to the gateway's MCP door alone, through
// `client mcp` (stdio) over the agent socket. Flags take the --flag=value
// form: claude's list flags are variadic and would otherwise swallow a
// prompt that follows them.
//
// The door's tools are offered to the model directly: Claude Code (2.1.328
// measured) otherwise defers every MCP server's tools behind its ToolSearch
// tool and tells the model that a deferred tool fails until it is loaded,
// though these are its only actuators. The server's alwaysLoad does that
// for this server alone (the API's defer_loading: false), where the
// ENABLE_TOOL_SEARCH=false variable would change the whole process.
func DoorOnly(argv []string, client string) ([]string, error) {
	at := ClaudeAt(argv)
	if at < 0 {
		return nil, fmt.Errorf("door-only mode starts Claude Code, and this command line does not (no claude in %q)", argv)
	}
	for _, a := range argv[at+1:] {
		if a == "--" {
			break
		}
		switch name, _, _ := strings.Cut(a, "="); name {
		case "--mcp-config", "--dangerously-skip-permissions", "--allow-dangerously-skip-permissions":
			return nil, fmt.Errorf("door-only mode sets Claude Code's MCP servers and permissions itself; drop %s", name)
		}
	}
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		DoorServer: map[string]any{"type": "stdio", "command": client, "args": []string{"mcp"}, "alwaysLoad": true},
	}})
	if err != nil {
		return nil, err
	}
	flags := []string{
		"--disallowedTools=" + strings.Join(DoorOnlyDisallowed, ","),
		"--mcp-config=" + string(cfg),
		"--strict-mcp-config",
	}
	return append(append(append([]string{}, argv[:at+1]...), flags...), argv[at+1:]...), nil
}
