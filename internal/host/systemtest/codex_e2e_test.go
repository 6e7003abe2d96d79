package systemtest

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

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// CodexVersion is the codex CLI the check runs (its static musl build).
const CodexVersion = "0.169.0"

// scriptedResponses is a fake OpenAI Responses API driving an agent: a
// prompt holding "RUN:<command>" gets one call of the agent's shell tool
// (tool, with the command in argument arg); the answer to its output
// repeats it ("RESULT: …"); anything else gets text.
type scriptedResponses struct {
	*httptest.Server
	tool, arg string
	mu        sync.Mutex
	keys      []string
}

func newScriptedResponses(t *testing.T, tool, arg string) *scriptedResponses {
	f := &scriptedResponses{tool: tool, arg: arg}
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
		args, _ := json.Marshal(map[string]string{f.arg: command})
		item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_agent1", "name": f.tool, "arguments": string(args), "status": "completed"}
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

const openaiHostKey = "sk-openai-host-only-agents-e2e-77aa"

// openaiAgent is a daemon whose one agent runs in the claude-code image (a
// Debian userland) with the model door's openai provider in front of fake.
func openaiAgent(t *testing.T, name string, fake *scriptedResponses) (e *Env, agent, workspace string) {
	t.Helper()
	e = modelAgent(t, name, "openai", openaiHostKey, fake.URL, "")
	a := e.Agents[0]
	return e, a, filepath.Join(e.Home, "agents", a, "workspace")
}

// modelAgent is a daemon whose one agent runs in the claude-code image with
// the model door's provider api (anthropic, openai) in front of url, its key
// a host secret the agent's sandbox never holds; extra is more of the
// agent's YAML, indented as its keys are.
func modelAgent(t *testing.T, name, api, key, url, extra string) *Env {
	t.Helper()
	image := testenv.AgentImage(t, "claude-code")
	e := New(t, name)
	a := e.Agents[0]
	e.WriteSecrets(fmt.Sprintf("secrets:\n  %s_key: {value: %q, agents: [%q], tools: [%s]}\n", api, key, a, api))
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf(`gateway:
  clientBinary: %s
  models:
    %s: {api: %s, url: %q, secret: %s_key, private: allow}
agents:
  %s:
    image: %s
    model: {providers: [%s]}
    limits: {execTimeout: 3m, memory: 1g}
`, clientBin, api, api, url, api, a, image, api) + extra
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// runAgent runs `toolgate run AGENT ARGS…`, which must succeed and print
// the fake's answer to the tool's output (want in it); then the fake must
// have seen only the host's key, and the run's model calls must link to
// it and record the tool call the model emitted.
func runAgent(t *testing.T, e *Env, a string, fake *scriptedResponses, want string, args ...string) {
	t.Helper()
	toolgate, _ := testenv.Binaries(t)
	cmd := exec.Command(toolgate, append([]string{"run", a}, args...)...)
	cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
	o, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(o), "RESULT:") || !strings.Contains(string(o), want) {
		t.Fatalf("run: %v\n%s", err, o)
	}
	fake.mu.Lock()
	keys := append([]string(nil), fake.keys...)
	fake.mu.Unlock()
	for _, k := range keys {
		if k != "Bearer "+openaiHostKey {
			t.Fatalf("the fake was sent %q, not the host's key", k)
		}
	}
	var runID string
	for _, en := range e.Entries(audit.Filter{Agent: a, Tool: "exec"}) {
		if en.Phase != gateway.PhaseResult {
			runID = en.ID
		}
	}
	models := e.Entries(audit.Filter{Agent: a, Type: string(gateway.KindModel)})
	var linked, toolCall bool
	for _, m := range models {
		linked = linked || m.Parent == runID
		b, _ := json.Marshal(m)
		toolCall = toolCall || strings.Contains(string(b), "call_agent1")
	}
	if runID == "" || !linked || !toolCall {
		t.Fatalf("model entries %d, linked to run %q: %v, the tool call recorded: %v", len(models), runID, linked, toolCall)
	}
}

// TestCodexInSandbox: the real codex CLI (from npm, its static build), run
// by `toolgate run` in a sandbox, talks to a fake Responses API through the
// model door: its exec_command runs in the sandbox, the fake sees the
// host's key, and the run's model calls are on the record, linked to it.
func TestCodexInSandbox(t *testing.T) {
	pkg := testenv.NPMPackage(t, "@openai/codex", CodexVersion+"-linux-x64")
	fake := newScriptedResponses(t, "exec_command", "cmd")
	e, a, ws := openaiAgent(t, "codex", fake)
	if err := os.Link(filepath.Join(pkg, "vendor", "x86_64-unknown-linux-musl", "bin", "codex"), filepath.Join(ws, "codex")); err != nil {
		t.Fatal(err)
	}
	// codex ignores OPENAI_BASE_URL: its provider entry takes the door's
	// base URL from the environment of this run, which carries the run's id.
	runAgent(t, e, a, fake, "codex-42", "-e", "CODEX_HOME=/tmp/codex", "--", "sh", "-c",
		`mkdir -p $CODEX_HOME && printf '%s\n' 'model = "gpt-5.1-codex"' 'model_provider = "door"' 'web_search = "disabled"' '[model_providers.door]' 'name = "door"' \
  "base_url = \"$OPENAI_BASE_URL\"" 'env_key = "OPENAI_API_KEY"' 'wire_api = "responses"' > $CODEX_HOME/config.toml &&
exec /workspace/codex exec --json --skip-git-repo-check --ephemeral -s danger-full-access --disable plugins --disable remote_plugin --disable shell_snapshot -c analytics.enabled=false "RUN:echo codex-\$((6*7)) > /workspace/codex.txt; cat /workspace/codex.txt" </dev/null`)
	if b, err := os.ReadFile(filepath.Join(ws, "codex.txt")); err != nil || string(b) != "codex-42\n" {
		t.Fatalf("codex's command did not run in the sandbox: %q %v", b, err)
	}
}

// PiVersion is the pi coding agent the check runs.
const PiVersion = "0.73.1"

// TestPiInSandbox: the real pi coding agent (from npm, run by the host's
// Node.js, both put in the workspace) in a sandbox, through the model door
// to a fake Responses API: its bash tool runs in the sandbox, the fake
// sees the host's key, the run's model calls are on the record.
func TestPiInSandbox(t *testing.T) {
	testenv.NeedPrograms(t, "node")
	pkg := testenv.NPMPackage(t, "@mariozechner/pi-coding-agent", PiVersion)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	fake := newScriptedResponses(t, "bash", "command")
	e, a, ws := openaiAgent(t, "pi", fake)
	// node_modules as npm laid it out (hard links: no copy of 200 MB).
	mods := filepath.Dir(filepath.Dir(pkg))
	if out, err := exec.Command("cp", "-al", mods, filepath.Join(ws, "node_modules")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := exec.Command("cp", node, filepath.Join(ws, "node")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	runAgent(t, e, a, fake, "pi-42", "-e", "PI_CODING_AGENT_DIR=/tmp/pi", "-e", "PI_OFFLINE=1", "--", "sh", "-c",
		`mkdir -p $PI_CODING_AGENT_DIR && printf '{"providers":{"door":{"baseUrl":"%s","api":"openai-responses","apiKey":"OPENAI_API_KEY","models":[{"id":"fake-model"}]}}}' "$OPENAI_BASE_URL" > $PI_CODING_AGENT_DIR/models.json &&
exec /workspace/node /workspace/node_modules/@mariozechner/pi-coding-agent/dist/cli.js --provider door --model fake-model --no-session -p "RUN:echo pi-\$((6*7)) > /workspace/pi.txt; cat /workspace/pi.txt" </dev/null`)
	if b, err := os.ReadFile(filepath.Join(ws, "pi.txt")); err != nil || string(b) != "pi-42\n" {
		t.Fatalf("pi's command did not run in the sandbox: %q %v", b, err)
	}
}
