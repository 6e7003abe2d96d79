package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// CodexVersion is the codex CLI the check runs (its static musl build).
const CodexVersion = "0.169.0"

// scriptedResponses is a fake OpenAI Responses API driving codex: a prompt
// holding "RUN:<command>" gets one exec_command call; the answer to its
// output repeats it ("RESULT: …"); anything else gets text.
type scriptedResponses struct {
	*httptest.Server
	mu   sync.Mutex
	keys []string
}

func newScriptedResponses(t *testing.T) *scriptedResponses {
	f := &scriptedResponses{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *scriptedResponses) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.keys = append(f.keys, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.Error(w, `{"error":{"message":"no such path"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Model string            `json:"model"`
		Input []json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	text, command := "FAKE-OK", ""
	for _, raw := range req.Input {
		var item struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Output  json.RawMessage `json:"output"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(raw, &item)
		switch {
		case item.Type == "function_call_output":
			var out string
			if json.Unmarshal(item.Output, &out) != nil {
				out = string(item.Output)
			}
			text, command = "RESULT: "+out, ""
		case item.Role == "user":
			for _, c := range item.Content {
				if _, cmd, ok := strings.Cut(c.Text, "RUN:"); ok && text == "FAKE-OK" {
					command = strings.TrimSpace(cmd)
				}
			}
		}
	}
	sse := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	var item map[string]any
	if command != "" {
		args, _ := json.Marshal(map[string]string{"cmd": command})
		item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_codex1", "name": "exec_command", "arguments": string(args), "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1", "model": req.Model, "status": "in_progress", "output": []any{}}})
	sse("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	if command == "" {
		sse("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": text})
	}
	sse("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "model": req.Model, "status": "completed",
		"output": []any{item}, "usage": map[string]any{"input_tokens": 100, "output_tokens": 20, "total_tokens": 120, "input_tokens_details": map[string]any{"cached_tokens": 0}}}})
}

const codexHostKey = "sk-openai-host-only-codex-e2e-77aa"

// TestCodexInSandbox: the real codex CLI (from npm, its static build), run
// by `toolgate run` in a sandbox, talks to a fake Responses API through the
// model door: its exec_command runs in the sandbox, the fake sees the
// host's key, and the run's model calls are on the record, linked to it.
func TestCodexInSandbox(t *testing.T) {
	image := testenv.AgentImage(t, "claude-code") // a Debian userland; codex itself is static
	pkg := testenv.NPMPackage(t, "@openai/codex", CodexVersion+"-linux-x64")
	fake := newScriptedResponses(t)
	e := newEnv(t, "codex")
	a := e.agents[0]
	if err := os.WriteFile(filepath.Join(e.home, "secrets.yaml"),
		[]byte(fmt.Sprintf("secrets:\n  openai_key: {value: %q, agents: [%q], tools: [openai]}\n", codexHostKey, a)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf(`gateway:
  clientBinary: %s
  models:
    openai: {api: openai, url: %q, secret: openai_key, private: allow}
agents:
  %s:
    image: %s
    model: {providers: [openai]}
    limits: {execTimeout: 3m, memory: 1g}
`, clientBin, fake.URL, a, image)
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The CLI and its configuration, put in the workspace.
	ws := filepath.Join(e.home, "agents", a, "workspace")
	bin := filepath.Join(pkg, "vendor", "x86_64-unknown-linux-musl", "bin", "codex")
	if err := os.Link(bin, filepath.Join(ws, "codex")); err != nil {
		t.Fatal(err)
	}
	toolgate, _ := testenv.Binaries(t)
	// codex ignores OPENAI_BASE_URL: its provider entry takes the door's
	// base URL from the environment of this run, which carries the run's id.
	cmd := exec.Command(toolgate, "run", a, "-e", "CODEX_HOME=/tmp/codex", "--", "sh", "-c",
		`mkdir -p $CODEX_HOME && printf '%s\n' 'model = "gpt-5.1-codex"' 'model_provider = "door"' '[model_providers.door]' 'name = "door"' \
  "base_url = \"$OPENAI_BASE_URL\"" 'env_key = "OPENAI_API_KEY"' 'wire_api = "responses"' > $CODEX_HOME/config.toml &&
exec /workspace/codex exec --json --skip-git-repo-check --ephemeral -s danger-full-access --disable plugins --disable remote_plugin --disable shell_snapshot -c analytics.enabled=false "RUN:echo codex-\$((6*7)) > /workspace/codex.txt; cat /workspace/codex.txt" </dev/null`)
	cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.home)
	o, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(o), "RESULT:") || !strings.Contains(string(o), "codex-42") {
		t.Fatalf("codex run: %v\n%s", err, o)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "codex.txt")); err != nil || string(b) != "codex-42\n" {
		t.Fatalf("codex's command did not run in the sandbox: %q %v", b, err)
	}
	f := fake
	f.mu.Lock()
	keys := append([]string(nil), f.keys...)
	f.mu.Unlock()
	for _, k := range keys {
		if k != "Bearer "+codexHostKey {
			t.Fatalf("the fake was sent %q, not the host's key", k)
		}
	}
	var runID string
	for _, en := range e.entries(audit.Filter{Agent: a, Tool: "exec"}) {
		if strings.Contains(string(en.Args), "codex exec") && en.Phase != gateway.PhaseResult {
			runID = en.ID
		}
	}
	models := e.entries(audit.Filter{Agent: a, Type: string(gateway.KindModel)})
	var linked, toolCall bool
	for _, m := range models {
		linked = linked || m.Parent == runID
		b, _ := json.Marshal(m)
		toolCall = toolCall || strings.Contains(string(b), "call_codex1")
	}
	if runID == "" || !linked || !toolCall {
		t.Fatalf("model entries %d, linked to run %q: %v, the tool call recorded: %v", len(models), runID, linked, toolCall)
	}
}
