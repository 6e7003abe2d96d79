package systemtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// scriptedAnthropic is a fake Anthropic Messages API that drives a real
// agent: a prompt holding "RUN:<command>" gets one Bash tool call running
// the command, "MCP:<command>" one call of the MCP door's exec; the answer to a tool result repeats it ("RESULT[error]:
// …"); anything else gets plain text. Every request is kept, headers too.
type scriptedAnthropic struct {
	*httptest.Server
	mu       sync.Mutex
	reqs     []*http.Request
	tools    [][]string          // the tool names each request offered
	deferred [][]string          // those of them offered with defer_loading
	schemas  []map[string]string // each request's tools' input schemas
	toolUses []string            // the tool_use ids answered, in order
}

func newScriptedAnthropic(t *testing.T) *scriptedAnthropic {
	f := &scriptedAnthropic{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *scriptedAnthropic) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reqs {
		out = append(out, r.Header.Get("X-Api-Key")+r.Header.Get("Authorization"))
	}
	return out
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	ToolUseID string          `json:"tool_use_id"`
}

func blocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func (f *scriptedAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":12}`)
		return
	}
	var req struct {
		Model string `json:"model"`
		Tools []struct {
			Name         string          `json:"name"`
			DeferLoading bool            `json:"defer_loading"`
			InputSchema  json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	var names, deferred []string
	schemas := map[string]string{}
	for _, tool := range req.Tools {
		names = append(names, tool.Name)
		if tool.DeferLoading {
			deferred = append(deferred, tool.Name)
		}
		schemas[tool.Name] = string(tool.InputSchema)
	}
	f.mu.Lock()
	f.tools, f.deferred, f.schemas = append(f.tools, names), append(f.deferred, deferred), append(f.schemas, schemas)
	f.mu.Unlock()
	text, command, toolName := "FAKE-OK", "", "Bash"
	if n := len(req.Messages); n > 0 {
		for _, b := range blocks(req.Messages[n-1].Content) {
			if b.Type == "tool_result" {
				var parts []string
				for _, c := range blocks(b.Content) {
					parts = append(parts, c.Text)
				}
				tag := "RESULT"
				if b.IsError {
					tag = "RESULT[error]"
				}
				text = tag + ": " + strings.Join(parts, " ")
			}
		}
		if text == "FAKE-OK" {
			for _, m := range req.Messages {
				for _, b := range blocks(m.Content) {
					if _, cmd, ok := strings.Cut(b.Text, "RUN:"); ok && m.Role == "user" {
						command = strings.TrimSpace(cmd)
					}
					if _, cmd, ok := strings.Cut(b.Text, "MCP:"); ok && m.Role == "user" {
						command, toolName = strings.TrimSpace(cmd), "mcp__toolgate__exec"
					}
				}
			}
		}
	}
	sse := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_fake", "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 50, "output_tokens": 1}}})
	stop := "end_turn"
	if command != "" {
		args := map[string]string{"command": command}
		if toolName == "Bash" {
			args["description"] = "run the scripted command"
		}
		input, _ := json.Marshal(args)
		f.mu.Lock()
		id := fmt.Sprintf("toolu_fake%d", len(f.reqs))
		f.toolUses = append(f.toolUses, id)
		f.mu.Unlock()
		sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": id, "name": toolName, "input": map[string]any{}}})
		sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		stop = "tool_use"
	} else {
		sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
	}
	sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": 20}})
	sse("message_stop", map[string]any{"type": "message_stop"})
}

const claudeHostKey = "sk-ant-host-only-claude-e2e-5f0c2a"

// TestClaudeCodeInSandbox runs the real Claude Code CLI inside the
// claude-code image, started by `toolgate run`, its model calls going
// through the model door to a fake Anthropic API on the host: its Bash
// calls are decided by policy through the hook gate (one allowed and run,
// one denied and not run), the fake sees the host's key while the sandbox
// holds only a placeholder, and the audit links the model calls and the
// connection the Bash command opened (egress to a service on the host) to
// the run's exec, beside the hook decisions.
func TestClaudeCodeInSandbox(t *testing.T) {
	fake := newScriptedAnthropic(t)
	// A service on the host the agent may reach through egress.
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pong") }))
	defer service.Close()
	_, servicePort, _ := strings.Cut(strings.TrimPrefix(service.URL, "http://"), ":")
	e := modelAgent(t, "claude", "anthropic", claudeHostKey, fake.URL, fmt.Sprintf(`    egress: {private: allow, allow: ["localhost:%s"]}
    rules:
      - name: no-forbidden
        deny: 'tool == "Bash" && command.contains("forbidden")'
        reason: the word forbidden is not for Bash
`, servicePort))
	a := e.Agents[0]
	claude := func(prompt string, extra ...string) (string, int) {
		args := append([]string{"run", a, "-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}, extra...)
		return e.CLI("", append(args, "--", "claude", "-p", "--model", "claude-sonnet-4-5", prompt)...)
	}

	o, code := claude("RUN:echo allowed-$((6*7)) > /workspace/out.txt && cat /workspace/out.txt && curl -fsS http://localhost:" + servicePort + "/ping")
	if code != 0 || !strings.Contains(o, "RESULT: allowed-42") || !strings.Contains(o, "pong") {
		t.Fatalf("allowed Bash call: exit %d\n%s", code, o)
	}
	if b, err := os.ReadFile(filepath.Join(e.Home, "agents", a, "workspace", "out.txt")); err != nil || string(b) != "allowed-42\n" {
		t.Fatalf("the allowed command's file: %q %v", b, err)
	}
	o, code = claude("RUN:echo forbidden > /workspace/no.txt")
	if !strings.Contains(o, "RESULT[error]") || !strings.Contains(o, "the word forbidden is not for Bash") {
		t.Fatalf("denied Bash call: exit %d\n%s", code, o)
	}
	if _, err := os.Stat(filepath.Join(e.Home, "agents", a, "workspace", "no.txt")); err == nil {
		t.Fatal("the denied command ran")
	}

	// The key: the fake saw the host's, the sandbox has none.
	keys := fake.keys()
	if len(keys) < 4 {
		t.Fatalf("the fake saw %d requests", len(keys))
	}
	for _, k := range keys {
		if k != claudeHostKey {
			t.Fatalf("the fake was sent key %q, not the host's", k)
		}
	}
	res, err := e.Call(a, "exec", map[string]any{"command": "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ANTHROPIC_API_KEY=toolgate-placeholder; grep -rl " + claudeHostKey + " / 2>/dev/null | head -3; true"})
	if err != nil || strings.Contains(fmt.Sprint(Out(res, "stdout")), "/") {
		t.Fatalf("the host key inside the sandbox: %v %+v", err, res)
	}
	logs, _ := filepath.Glob(filepath.Join(e.Home, "logs", "*"))
	for _, p := range logs {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), claudeHostKey) {
			t.Fatalf("the host key is in %s", p)
		}
	}

	// The audit: each run is an exec; its model calls and hook decisions link to it.
	runs := e.Entries(audit.Filter{Agent: a, Tool: "exec"})
	var runIDs []string
	for _, r := range runs {
		if r.Phase != gateway.PhaseResult && strings.Contains(string(r.Args), "claude") {
			runIDs = append(runIDs, r.ID)
		}
	}
	if len(runIDs) != 2 {
		t.Fatalf("want 2 claude runs, got %d", len(runIDs))
	}
	models := e.Entries(audit.Filter{Agent: a, Type: string(gateway.KindModel)})
	hookEntries := e.Entries(audit.Filter{Agent: a, Type: string(gateway.KindHook)})
	linked := func(es []*gateway.Entry, id string) (n int) {
		for _, en := range es {
			if en.Parent == id {
				n++
			}
		}
		return n
	}
	for _, id := range runIDs {
		if linked(models, id) == 0 {
			t.Errorf("no model call links to run %s: %+v", id, models)
		}
		if linked(hookEntries, id) == 0 {
			t.Errorf("no hook entry links to run %s: %+v", id, hookEntries)
		}
	}
	// One session ties a run together: its exec, its hook decisions, its model calls.
	var session string
	for _, r := range runs {
		if r.ID == runIDs[0] {
			session = r.Session
		}
	}
	if session == "" {
		t.Errorf("toolgate run recorded its exec without a session")
	}
	for _, en := range append(hookEntries, models...) {
		if en.Parent == runIDs[0] && en.Session != session {
			t.Errorf("%s %s of run %s: session %q, want the run's %q", en.Type, en.Tool, runIDs[0], en.Session, session)
		}
	}
	// The Bash command's connection is the run's too.
	eg := e.Entries(audit.Filter{Agent: a, Type: string(gateway.KindEgress)})
	if len(eg) == 0 || eg[0].Parent != runIDs[0] || eg[0].Detail["host"] != "localhost" {
		t.Errorf("egress entries %+v, want localhost linked to run %s", eg, runIDs[0])
	}
	var allowed, denied bool
	for _, h := range hookEntries {
		if h.Tool == "Bash" && h.Phase != gateway.PhaseResult {
			allowed = allowed || h.Decision == "allow"
			denied = denied || (h.Decision == "deny" && h.Rule == "no-forbidden")
		}
	}
	if !allowed || !denied {
		t.Errorf("hook gate entries for Bash: allowed %v, denied %v: %+v", allowed, denied, hookEntries)
	}
}

// TestClaudeCodeDoorOnly: with --door-only the real CLI is offered no
// actuator of its own, only the MCP door's tools — directly, in the
// request's tools with their schemas, not deferred behind its ToolSearch —
// and acts through them: its exec is a call of the gateway's, decided and
// recorded via mcp, in the run's session beneath the model call that asked
// for it, as `toolgate audit show --session` draws it.
func TestClaudeCodeDoorOnly(t *testing.T) {
	fake := newScriptedAnthropic(t)
	e := modelAgent(t, "dooronly", "anthropic", claudeHostKey, fake.URL, "")
	a := e.Agents[0]
	const session = "door-only-run-1"
	o, code := e.CLI("", "run", a, "--door-only", "--session", session, "-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "--",
		"claude", "-p", "--model", "claude-sonnet-4-5", "MCP:echo door-$((6*7)) > /workspace/door.txt && cat /workspace/door.txt")
	if code != 0 || !strings.Contains(o, "RESULT:") || !strings.Contains(o, "door-42") {
		t.Fatalf("door-only run: exit %d\n%s\ntools offered: %q", code, o, fake.tools)
	}
	if b, err := os.ReadFile(filepath.Join(e.Home, "agents", a, "workspace", "door.txt")); err != nil || string(b) != "door-42\n" {
		t.Fatalf("the door's exec did not run: %q %v", b, err)
	}
	fake.mu.Lock()
	offered, deferred, schemas, toolUses := fake.tools[0], fake.deferred[0], fake.schemas[0], append([]string(nil), fake.toolUses...)
	fake.mu.Unlock()
	for _, own := range []string{"Bash", "Write", "Edit", "Read", "NotebookEdit", "Agent"} {
		if slices.Contains(offered, own) {
			t.Errorf("door-only still offers %s: %q", own, offered)
		}
	}
	// The first request already offers the door's tools themselves.
	for _, door := range []string{"mcp__toolgate__exec", "mcp__toolgate__read", "mcp__toolgate__write", "mcp__toolgate__patch"} {
		if !slices.Contains(offered, door) || slices.Contains(deferred, door) || !strings.Contains(schemas[door], `"properties"`) {
			t.Errorf("%s not offered directly: offered %q, deferred %q, schema %s", door, offered, deferred, schemas[door])
		}
	}
	if len(toolUses) != 1 {
		t.Fatalf("the fake asked for %d tool calls: %q", len(toolUses), toolUses)
	}

	// The exec through the door is the run's: its session, under the model
	// call that asked for it, which is under the run's exec.
	var runID, modelID, doorID string
	for _, en := range e.Entries(audit.Filter{Agent: a}) {
		switch {
		case en.Type == gateway.KindCore && en.Via == gateway.ViaAdmin && en.Phase == gateway.PhaseDecision:
			runID = en.ID
		case en.Type == gateway.KindModel && en.Phase == gateway.PhaseResult && slices.Contains(strs(en.Detail[gateway.DetailToolUseIDs]), toolUses[0]):
			modelID = en.ID
		case en.Via == "mcp" && en.Tool == "exec" && en.Phase == gateway.PhaseDecision:
			doorID = en.ID
			if en.Decision != "allow" || en.Session != session || en.Parent == "" || en.Detail[gateway.DetailToolUseID] != toolUses[0] {
				t.Errorf("the door's exec: %s, session %q (want %q), parent %q, tool_use id %v (want %s)",
					en.Decision, en.Session, session, en.Parent, en.Detail[gateway.DetailToolUseID], toolUses[0])
			}
		}
	}
	if runID == "" || modelID == "" || doorID == "" {
		t.Fatalf("run %q, model call %q, door exec %q: one is not on the record", runID, modelID, doorID)
	}
	show, code := e.CLI("", "audit", "show", "--session", session)
	tree := parseTree(show)
	if code != 0 || tree[doorID].parent != modelID || tree[modelID].parent != runID || tree[doorID].agent != a {
		t.Fatalf("audit show --session: exit %d; door exec under %q (want the model call %s), model call under %q (want the run %s):\n%s",
			code, tree[doorID].parent, modelID, tree[modelID].parent, runID, show)
	}
}

// strs is a JSON list of strings as decoded into an entry's detail.
func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
