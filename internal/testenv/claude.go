package testenv

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// ClaudeCLI is the real Claude Code CLI: $TOOLGATE_CLAUDE, else claude on
// PATH. Missing, the test is skipped, or fails under TOOLGATE_REQUIRE_CLAUDE=1
// (scripts/test.sh installs the CLI and sets it).
func ClaudeCLI(t testing.TB) string {
	Long(t, "the Claude Code CLI")
	t.Helper()
	p := os.Getenv("TOOLGATE_CLAUDE")
	if p == "" {
		p, _ = exec.LookPath("claude")
	}
	if p == "" {
		if os.Getenv("TOOLGATE_REQUIRE_CLAUDE") == "1" {
			t.Fatal("TOOLGATE_REQUIRE_CLAUDE=1 but no Claude Code CLI: set TOOLGATE_CLAUDE or put claude on PATH")
		}
		t.Skip("no Claude Code CLI (set TOOLGATE_CLAUDE or put claude on PATH)")
	}
	return p
}

// ToolUse is one tool call the fake model makes.
type ToolUse struct {
	Name  string
	Input map[string]any
}

// ToolResult is what the CLI sent back for one of the fake model's calls.
type ToolResult struct {
	ID      string
	Content string
	IsError bool
}

// FakeAnthropic is a loopback Messages API playing a scripted model: each
// turn of the main loop answers with the next tool call, then with a final
// text once the script is done. It records the tool results the CLI sends.
type FakeAnthropic struct {
	URL string

	mu      sync.Mutex
	script  []ToolUse
	results []ToolResult
}

// NewFakeAnthropic serves script until the test ends.
func NewFakeAnthropic(t testing.TB, script ...ToolUse) *FakeAnthropic {
	f := &FakeAnthropic{script: script}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// ListenUnix serves the API on a unix socket as well, one any user may
// connect to: for a CLI in a sandbox without network, through a forwarder.
func (f *FakeAnthropic) ListenUnix(t testing.TB, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// Results are the tool results received so far, in order.
func (f *FakeAnthropic) Results() []ToolResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ToolResult(nil), f.results...)
}

type apiRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

func (f *FakeAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.Contains(r.URL.Path, "count_tokens") {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not here"}}`, http.StatusNotFound)
		return
	}
	var req apiRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The turn is the number of assistant messages so far; side requests
	// (no tools offered) get a plain answer.
	turn := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			turn++
		}
	}
	f.mu.Lock()
	if len(req.Tools) > 0 && len(req.Messages) > 0 {
		last := req.Messages[len(req.Messages)-1]
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		_ = json.Unmarshal(last.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "tool_result" {
				f.results = append(f.results, ToolResult{ID: b.ToolUseID, Content: contentText(b.Content), IsError: b.IsError})
			}
		}
	}
	var use *ToolUse
	if len(req.Tools) > 0 && turn < len(f.script) {
		use = &f.script[turn]
	}
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_fake%d", turn), "type": "message", "role": "assistant", "model": "claude-fake",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}})
	stop := "end_turn"
	if use != nil {
		stop = "tool_use"
		input, _ := json.Marshal(use.Input)
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%02d", turn), "name": use.Name, "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": "done"}})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 1}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

// contentText flattens a tool_result's content (a string or text blocks).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, x := range blocks {
		b.WriteString(x.Text)
	}
	return b.String()
}
