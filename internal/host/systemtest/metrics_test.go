package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// TestMetricsEndpoint: /metrics on the admin socket counts a call made
// through the pipeline, its phases, the sandbox and the audit writer.
func TestMetricsEndpoint(t *testing.T) {
	e := New(t, "metrics")
	agent := e.Agents[0]
	if _, err := e.Call(agent, "exec", map[string]any{"command": "true"}); err != nil {
		t.Fatal(err)
	}
	_, _ = e.Call(agent, "exec", map[string]any{"command": "rm -rf /tmp/x"}) // denied by the env's rule
	out := scrape(t, e)
	for _, want := range []string{
		`toolgate_calls_total{agent="` + agent + `",decision="allow",kind="core_tool",tool="exec"} 1`,
		`toolgate_calls_total{agent="` + agent + `",decision="deny",kind="core_tool",tool="exec"} 1`,
		`toolgate_call_phase_seconds_count{kind="core_tool",phase="audit"} 2`,
		`toolgate_sandboxes{state="running"} 1`,
		`toolgate_sandbox_calls_waiting{agent="` + agent + `"} 0`,
		`toolgate_audit_syncs_total`,
		`toolgate_audit_index_lag_seconds`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in /metrics:\n%s", want, grep(out, "toolgate_"))
		}
	}
}

func grep(s, sub string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestMetricsModelLabels: model names are the agent's (its request) and
// the provider's (its answer) to choose. On /metrics a model call counts
// under its provider, and its model label is a configured name or pattern,
// every other name "other": hostile names, however many, add no series.
func TestMetricsModelLabels(t *testing.T) {
	var resolved atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		answer := req.Model
		if req.Model == "liar" { // an answer naming a model of its own
			answer = fmt.Sprintf("resolved-%d\"} 9\n", resolved.Add(1))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"m","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}`, answer)
	}))
	defer upstream.Close()
	e := NewHome(t, Extra{
		Gateway:   fmt.Sprintf("  models:\n    anthropic:\n      {api: anthropic, url: %q, secret: key, private: allow,\n       prices: {fake-tool: {input: 1}, \"fake-t*\": {input: 2}}}\n", upstream.URL),
		AgentKeys: "    model: {providers: [anthropic]}\n",
	}, "modellabels")
	a := e.Agents[0]
	e.WriteSecrets(fmt.Sprintf("secrets:\n  key: {value: sk-test, agents: [%q], tools: [anthropic]}\n", a))
	e.Start()

	sock := filepath.Join(e.Home, "agents", a, "sock", proto.SocketName)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	models := []string{"fake-tool", "liar"}
	for i := range 20 {
		models = append(models, fmt.Sprintf("fake-t-%d", i), fmt.Sprintf("x-%d\"} 1\ntoolgate_calls_total{agent=\"forged\"", i))
	}
	for _, m := range models {
		body, _ := json.Marshal(map[string]any{"model": m, "max_tokens": 5, "messages": []any{map[string]string{"role": "user", "content": "hi"}}})
		resp, err := hc.Post("http://toolgate"+proto.ModelRoute+"anthropic/v1/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("model %q: %d %s", m, resp.StatusCode, b)
		}
	}

	out := scrape(t, e)
	for _, want := range []string{
		fmt.Sprintf(`toolgate_calls_total{agent=%q,decision="allow",kind="model",tool="anthropic"} %d`, a, len(models)),
		fmt.Sprintf(`toolgate_model_tokens_total{agent=%q,model="fake-tool",type="input"} 10`, a),
		fmt.Sprintf(`toolgate_model_tokens_total{agent=%q,model="fake-t*",type="input"} 200`, a),
		fmt.Sprintf(`toolgate_model_tokens_total{agent=%q,model="other",type="input"} 210`, a),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in /metrics:\n%s", want, grep(out, "toolgate_"))
		}
	}
	if n := strings.Count(out, "\ntoolgate_model_tokens_total{"); n != 6 { // 3 models × input, output
		t.Errorf("%d model token series, want 6:\n%s", n, grep(out, "toolgate_model"))
	}
	for _, bad := range []string{`tool="unknown"`, "forged", "resolved-", "x-1"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s on /metrics:\n%s", bad, grep(out, "toolgate_"))
		}
	}
}

// scrape reads /metrics on e's admin socket.
func scrape(t *testing.T, e *Env) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(e.Home, api.SocketName))
	}}}
	resp, err := hc.Get("http://toolgate/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
