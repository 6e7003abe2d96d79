package modeldoor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/guest"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/fakeprovider"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
	"github.com/toolgate/toolgate/internal/host/policy"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/proto"
)

const realKey = "sk-real-host-key-0123456789"

// harness is a gateway with the model door on real agent sockets, a real
// audit log and policy engine, and a fake provider on loopback.
type harness struct {
	fake  *fakeprovider.Server
	gw    *gateway.Gateway
	door  *Door
	aw    *audit.Writer
	dir   string
	srv   *agentsock.Server
	meter *Meter
	tool  *Tool
}

// newHarness configures agents demo (anthropic + openai, key granted),
// other (no model section) and thief (the providers, but the key is not
// granted to it). extra is appended to the config YAML.
func newHarness(t testing.TB, agentModel string) *harness {
	t.Helper()
	h := &harness{fake: fakeprovider.New(t), dir: t.TempDir(), meter: NewMeter()}
	if agentModel == "" {
		agentModel = "providers: [anthropic, openai]"
	}
	yaml := fmt.Sprintf(`
gateway:
  models:
    anthropic:
      api: anthropic
      url: %[1]s
      secret: model_key
      private: allow
      timeout: 2s
      prices:
        "fake-*": {input: 3, output: 15, cacheRead: 0.3}
    openai:
      api: openai
      url: %[1]s
      secret: model_key
      private: allow
      timeout: 2s
      headers: {OpenAI-Organization: org-host, OpenAI-Project: proj-host}
agents:
  demo:
    model: {%[2]s}
    rules:
      - deny: kind == "model" && args.model == "fake-denied-by-rule"
        reason: that model is kept for humans
  other: {}
  thief:
    model: {providers: [anthropic]}
  reach:
    egress: {allow: ["mcp.example.com:443", "*.docs.example:443"]}
    model: {providers: [anthropic, openai], serverTools: [mcp, web_search]}
    rules:
      - name: search-within-domains
        deny: kind == "model" && args.server_tools.exists(t, t.kind == "web_search" && !has(t.domains))
        reason: web search only within named domains
`, h.fake.URL, agentModel)
	path := filepath.Join(h.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(h.dir, path)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := secrets.New(h.dir, map[string]config.Secret{"model_key": {Value: realKey, Agents: []string{"demo", "reach"}, Tools: []string{"anthropic", "openai"}}})
	if err != nil {
		t.Fatal(err)
	}
	tool, err := NewTool(cfg, sec, h.meter, Env{})
	if err != nil {
		t.Fatal(err)
	}
	h.tool = tool
	snap := &gateway.Snapshot{Agents: map[string]gateway.AgentInfo{}, ByKind: map[gateway.Kind]gateway.Tool{gateway.KindModel: tool}, Decider: eng}
	for name := range cfg.Agents {
		snap.Agents[name] = gateway.AgentInfo{Name: name}
	}
	if h.aw, err = audit.Open(filepath.Join(h.dir, "logs"), audit.Options{}); err != nil {
		t.Fatal(err)
	}
	b := audit.NewBounder(1024)
	b.AddSecrets(sec.Values()...)
	h.gw = gateway.New(gateway.Options{Audit: h.aw, BoundArgs: b.Bound}, snap)
	h.door = New(h.gw)
	h.srv = agentsock.New(h.gw, agentsock.Options{})
	h.srv.Handle("POST "+Pattern, h.door)
	for name := range cfg.Agents {
		if err := h.srv.Serve(name, h.sock(name), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		h.srv.Close()
		h.aw.Close()
	})
	return h
}

func (h *harness) sock(agent string) string { return filepath.Join(h.dir, agent, "gateway.sock") }

// client talks HTTP to an agent's socket, as the in-sandbox forwarder does.
func (h *harness) client(agent string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", h.sock(agent))
		},
		DisableCompression: true,
	}}
}

func (h *harness) post(t testing.TB, agent, provider, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://toolgate/v1/model/"+provider+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "toolgate-placeholder")
	req.Header.Set("Authorization", "Bearer toolgate-placeholder")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.client(agent).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// entries returns the audit entries of kind model, after the async ones land.
func (h *harness) entries(t *testing.T) []*gateway.Entry {
	t.Helper()
	var out []*gateway.Entry
	if err := audit.Query(filepath.Join(h.dir, "logs"), audit.Filter{Type: string(gateway.KindModel)}, func(e *gateway.Entry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *harness) result(t *testing.T) *gateway.Entry {
	t.Helper()
	es := h.entries(t)
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Phase == gateway.PhaseResult {
			return es[i]
		}
	}
	t.Fatalf("no result entry among %d", len(es))
	return nil
}

func (h *harness) last(t *testing.T) *gateway.Entry {
	t.Helper()
	es := h.entries(t)
	if len(es) == 0 {
		t.Fatal("no model entries")
	}
	return es[len(es)-1]
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func body(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every API shape, streamed and not, with a tool_use turn: the answer
// passes through whole, the fake sees the host's key (never the
// placeholder), and the result entry has the usage, stop reason, tool_use
// ids and cost.
func TestForwardsEveryShape(t *testing.T) {
	h := newHarness(t, "")
	for _, c := range []struct {
		provider, path, api string
		stream              bool
		toolID, stop        string
	}{
		{"anthropic", "/v1/messages", "anthropic", true, fakeprovider.AnthropicToolID, "tool_use"},
		{"anthropic", "/v1/messages", "anthropic", false, fakeprovider.AnthropicToolID, "tool_use"},
		{"openai", "/v1/chat/completions", "chat", true, fakeprovider.OpenAIToolID, "tool_calls"},
		{"openai", "/v1/chat/completions", "chat", false, fakeprovider.OpenAIToolID, "tool_calls"},
		{"openai", "/v1/responses", "responses", true, fakeprovider.OpenAIToolID, "completed"},
		{"openai", "/v1/responses", "responses", false, fakeprovider.OpenAIToolID, "completed"},
	} {
		t.Run(fmt.Sprintf("%s stream=%v", c.path, c.stream), func(t *testing.T) {
			tool := map[string]string{"anthropic": `{"name":"Bash","input_schema":{}}`, "chat": `{"type":"function","function":{"name":"Bash"}}`,
				"responses": `{"type":"function","name":"Bash"}`}[c.api]
			req := fmt.Sprintf(`{"model":%q,"max_tokens":100,"stream":%v,"tools":[%s],"messages":[{"role":"user","content":"hi"}]}`, fakeprovider.ModelToolUse, c.stream, tool)
			resp := h.post(t, "demo", c.provider, c.path, req, "Toolgate-Session", "sess-1", "Toolgate-Parent", "0123abcd")
			got := body(t, resp)
			if resp.StatusCode != 200 || !strings.Contains(got, c.toolID) {
				t.Fatalf("status %d body %s", resp.StatusCode, got)
			}
			if c.stream {
				if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
					t.Fatalf("content type %q", ct)
				}
				if want := strings.Join(fakeprovider.Events(c.api, fakeprovider.ModelToolUse), ""); c.api != "chat" && got != want {
					t.Fatalf("stream changed on the way:\n%s\nwant\n%s", got, want)
				}
			}
			reqs := h.fake.Requests()
			last := reqs[len(reqs)-1]
			if last.Key() != realKey || last.Path != c.path || strings.Contains(fmt.Sprint(last.Header), "placeholder") {
				t.Fatalf("upstream got key %q path %s headers %v", last.Key(), last.Path, last.Header)
			}
			if c.api == "chat" && c.stream && !strings.Contains(string(last.Body), `"include_usage":true`) {
				t.Fatalf("stream usage not asked for: %s", last.Body)
			}
			e := h.result(t)
			dt := e.Detail
			if e.Tool != c.provider || e.Session != "sess-1" || e.Parent != "0123abcd" || e.Error != "" {
				t.Fatalf("result entry %+v", e)
			}
			if num(dt["inputTokens"]) != fakeprovider.InputTokens || num(dt["outputTokens"]) != fakeprovider.OutputTokens ||
				num(dt["cacheReadTokens"]) != fakeprovider.CacheRead || dt["stopReason"] != c.stop || dt["model"] != fakeprovider.ModelToolUse {
				t.Fatalf("result detail %v", dt)
			}
			if ids, _ := dt["toolUseIds"].([]any); len(ids) != 1 || ids[0] != c.toolID {
				t.Fatalf("tool_use ids %v", dt["toolUseIds"])
			}
			wantCost := (fakeprovider.InputTokens*3 + fakeprovider.OutputTokens*15 + fakeprovider.CacheRead*0.3) / 1e6
			if c.provider == "anthropic" && (num(dt["costUSD"])-wantCost > 1e-12 || wantCost-num(dt["costUSD"]) > 1e-12) {
				t.Fatalf("cost %v, want %v", dt["costUSD"], wantCost)
			}
			if c.provider == "openai" && dt["unpriced"] != true {
				t.Fatalf("an unpriced model not marked: %v", dt)
			}
		})
	}
	// The decision entries carry the facts policy saw.
	var dec *gateway.Entry
	for _, e := range h.entries(t) {
		if e.Phase == gateway.PhaseDecision {
			dec = e
		}
	}
	var args Args
	if err := json.Unmarshal(dec.Args, &args); err != nil || args.Model != fakeprovider.ModelToolUse || args.MaxTokens != 100 || !slices.Equal(args.Tools, []string{"Bash"}) || dec.Decision != "allow" {
		t.Fatalf("decision %+v args %+v %v", dec, args, err)
	}
	h.noKeyInAudit(t)
}

// count_tokens passes and counts nothing.
func TestCountTokens(t *testing.T) {
	h := newHarness(t, "")
	resp := h.post(t, "demo", "anthropic", "/v1/messages/count_tokens", `{"model":"fake-text","messages":[]}`)
	if got := body(t, resp); resp.StatusCode != 200 || !strings.Contains(got, "12") {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	if e := h.result(t); e.Detail["inputTokens"] != nil || e.Error != "" {
		t.Fatalf("count_tokens recorded usage: %+v", e)
	}
}

func (h *harness) noKeyInAudit(t *testing.T) {
	t.Helper()
	h.aw.Close()
	err := filepath.Walk(filepath.Join(h.dir, "logs"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if strings.Contains(string(data), realKey) {
			t.Errorf("%s holds the key", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A refusal in the provider's own error shape, with its rule and audit id;
// nothing reaches the upstream.
func TestRefusals(t *testing.T) {
	h := newHarness(t, `providers: [anthropic, openai], allow: ["fake-*"], maxBody: 4k`)
	for _, c := range []struct {
		name, agent, provider, path, body string
		status                            int
		rule, msg                         string
	}{
		{"model off the allowlist", "demo", "anthropic", "/v1/messages", `{"model":"claude-opus","max_tokens":1}`, 403, model.RuleAllow, "not on agent demo's model allowlist"},
		{"rule", "demo", "openai", "/v1/chat/completions", `{"model":"fake-denied-by-rule"}`, 403, "rules[0]", "kept for humans"},
		{"agent without models", "other", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":1}`, 403, model.RuleProvider, "may not use model provider"},
		{"unknown provider", "demo", "gemini", "/v1/messages", `{"model":"fake-text","max_tokens":1}`, 400, "args.invalid", `no provider \"gemini\"`},
		{"unknown endpoint", "demo", "anthropic", "/v1/complete", `{"model":"fake-text"}`, 400, "args.invalid", "not a anthropic endpoint"},
		{"bad body", "demo", "openai", "/v1/chat/completions", `{"model":`, 400, "args.invalid", "not valid JSON"},
		{"duplicate model", "demo", "openai", "/v1/chat/completions", `{"model":"fake-text","model":"claude-opus"}`, 400, "args.invalid", "twice"},
		{"body over the limit", "demo", "openai", "/v1/chat/completions", `{"model":"fake-text","x":"` + strings.Repeat("a", 5000) + `"}`, 413, "model.body", "over the agent's limit of 4096"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(h.fake.Requests())
			resp := h.post(t, c.agent, c.provider, c.path, c.body)
			got := body(t, resp)
			if resp.StatusCode != c.status || resp.Header.Get(HeaderRule) != c.rule || resp.Header.Get(HeaderAuditID) == "" || !strings.Contains(got, c.msg) {
				t.Fatalf("status %d rule %q id %q body %s", resp.StatusCode, resp.Header.Get(HeaderRule), resp.Header.Get(HeaderAuditID), got)
			}
			if c.path == "/v1/messages" && !strings.Contains(got, `"type":"error"`) {
				t.Fatalf("not in Anthropic's shape: %s", got)
			}
			if c.path == "/v1/chat/completions" && !strings.Contains(got, `{"error":{`) {
				t.Fatalf("not in OpenAI's shape: %s", got)
			}
			if len(h.fake.Requests()) != before {
				t.Fatal("a refused request reached the upstream")
			}
			if e := h.last(t); e.Decision != "deny" || e.Rule != c.rule || e.ID != resp.Header.Get(HeaderAuditID) {
				t.Fatalf("audit %+v", e)
			}
		})
	}
}

// The key is granted to demo only: thief's sandbox, placeholder or not,
// gets nothing from the door, and the upstream is never asked.
func TestPlaceholderAtAnotherAgentsDoor(t *testing.T) {
	h := newHarness(t, "")
	resp := h.post(t, "thief", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`, "X-Api-Key", realKey)
	got := body(t, resp)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(got, `secret \"model_key\" is not available to agent \"thief\"`) {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Fatalf("the upstream was asked %d times", n)
	}
	// demo's own door works with the same placeholder.
	resp = h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`)
	if got := body(t, resp); resp.StatusCode != 200 || !strings.Contains(got, "FAKE-OK") {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	if r := h.fake.Requests(); r[0].Key() != realKey {
		t.Fatalf("upstream key %q", r[0].Key())
	}
	h.noKeyInAudit(t)
}

// Upstream failures are passed on as they are, and recorded.
func TestUpstreamFailures(t *testing.T) {
	h := newHarness(t, "")
	t.Run("429 with retry-after", func(t *testing.T) {
		resp := h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-429","max_tokens":5}`)
		got := body(t, resp)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(got, "slow down") {
			t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, got)
		}
		e := h.result(t)
		if num(e.Detail["status"]) != 429 || num(e.Detail["retryAfter"]) != 7 || !strings.Contains(e.Error, "429") || !strings.Contains(e.Error, "slow down") {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		resp := h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-garbage","max_tokens":5}`)
		if got := body(t, resp); resp.StatusCode != 200 || !strings.Contains(got, "not json") {
			t.Fatalf("%d %q", resp.StatusCode, got)
		}
		// The provider bills an answer it sent, readable or not: an
		// estimate is charged, and the entry says so.
		if e := h.result(t); e.Detail["usage"] != "estimated" || num(e.Detail["estimatedTokens"]) == 0 || e.Detail["inputTokens"] != nil {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("cut mid-stream", func(t *testing.T) {
		resp := h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-cut","max_tokens":5,"stream":true}`)
		got := body(t, resp)
		if !strings.Contains(got, "message_start") || !strings.Contains(got, "event: error") || !strings.Contains(got, "cut the answer") {
			t.Fatalf("client saw %q", got)
		}
		if e := h.result(t); !strings.Contains(e.Error, "the upstream cut the answer") {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("hang", func(t *testing.T) {
		resp := h.post(t, "demo", "openai", "/v1/responses", `{"model":"fake-hang","stream":true}`)
		got := body(t, resp)
		if !strings.Contains(got, "sent nothing for 2s") {
			t.Fatalf("client saw %q", got)
		}
		if e := h.result(t); !strings.Contains(e.Error, "sent nothing for 2s") {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		h.fake.Close()
		resp := h.post(t, "demo", "openai", "/v1/chat/completions", `{"model":"fake-text"}`)
		got := body(t, resp)
		if resp.StatusCode != 502 || !strings.Contains(got, "could not reach the model provider") || !strings.Contains(got, `{"error":{`) {
			t.Fatalf("%d %s", resp.StatusCode, got)
		}
		if e := h.result(t); !strings.Contains(e.Error, "dialling") {
			t.Fatalf("%+v", e)
		}
	})
}

// A client that goes away mid-stream does not end the upstream request:
// the provider bills the answer all the same, so the door reads it to its
// end for the usage, counts it and records that the client left.
func TestClientDisconnect(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Chunks, h.fake.Gap = 200, 5*time.Millisecond
	resp := h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-slow","max_tokens":500,"stream":true}`)
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e := h.waitResults(t, 1)[0]
	if !strings.Contains(e.Error, "client went away") || e.Detail["usage"] != "measured" || num(e.Detail["outputTokens"]) != 200 {
		t.Fatalf("%+v", e)
	}
	if r := h.fake.Requests()[0]; !r.Finished || r.Billed != h.meter.Spent("demo", time.Now()).Tokens1h {
		t.Fatalf("upstream finished %v, billed %d; counted %+v", r.Finished, r.Billed, h.meter.Spent("demo", time.Now()))
	}
}

// waitResults waits for n result entries of model calls and returns them.
func (h *harness) waitResults(t *testing.T, n int) []*gateway.Entry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var res []*gateway.Entry
		for _, e := range h.entries(t) {
			if e.Phase == gateway.PhaseResult {
				res = append(res, e)
			}
		}
		if len(res) >= n {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d result entries after 30s, want %d", len(res), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Budgets: requests per minute answer 429 with Retry-After; tokens per
// hour refuse with 403 once spent; the reason says what was spent of what.
func TestBudgets(t *testing.T) {
	h := newHarness(t, `providers: [anthropic], budget: {requestsPerMinute: 2}`)
	for i := range 2 {
		if resp := h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body(t, resp))
		} else {
			body(t, resp)
		}
	}
	resp := h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`)
	got := body(t, resp)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get(HeaderRule) != model.RuleRPM || !strings.Contains(got, "rate_limit_error") {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, got)
	}

	h = newHarness(t, `providers: [anthropic], budget: {tokensPerHour: 100}`)
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`))
	resp = h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`)
	got = body(t, resp)
	if resp.StatusCode != 403 || !strings.Contains(got, "190 tokens in the last hour reach the budget of 100 per hour") {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
}

// The in-process entry point is decided and recorded like the socket's.
func TestSend(t *testing.T) {
	h := newHarness(t, "")
	resp, err := h.door.Send(context.Background(), &Request{Agent: "demo", Session: "s9", Provider: "anthropic", Path: "/v1/messages",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"model":"fake-tool","max_tokens":5,"stream":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	got := body(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(got, fakeprovider.AnthropicToolID) {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	if e := h.result(t); e.Via != "agent" || e.Session != "s9" || num(e.Detail["outputTokens"]) != fakeprovider.OutputTokens {
		t.Fatalf("%+v", e)
	}
	resp, err = h.door.Send(context.Background(), &Request{Agent: "other", Provider: "anthropic", Path: "/v1/messages", Body: []byte(`{"model":"fake-tool","max_tokens":5}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); resp.StatusCode != 403 || resp.Header.Get(HeaderRule) != model.RuleProvider || !strings.Contains(got, "permission_error") {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
}

// The in-sandbox forwarder: a plain-HTTP base URL whose first segment may
// carry hints, passed to the door on the agent socket.
func TestForwarder(t *testing.T) {
	h := newHarness(t, "")
	fw := httptest.NewServer(guest.NewModelForwarder(h.sock("demo")))
	defer fw.Close()
	base := strings.Replace(proto.ModelBaseURL(proto.ModelProvider{Name: "anthropic", API: "anthropic"}, "0123abcd", "sess-7"), "http://"+proto.ModelAddr, fw.URL, 1)
	req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(`{"model":"fake-tool","max_tokens":5,"stream":true}`))
	req.Header.Set("X-Api-Key", proto.ModelPlaceholderKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); resp.StatusCode != 200 || !strings.Contains(got, fakeprovider.AnthropicToolID) {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	if e := h.result(t); e.Session != "sess-7" || e.Parent != "0123abcd" || e.Tool != "anthropic" {
		t.Fatalf("%+v", e)
	}
	if k := h.fake.Requests()[0].Key(); k != realKey {
		t.Fatalf("upstream key %q", k)
	}
	openai := strings.Replace(proto.ModelBaseURL(proto.ModelProvider{Name: "openai", API: "openai"}, "", ""), "http://"+proto.ModelAddr, fw.URL, 1)
	resp, err = http.Post(openai+"/chat/completions", "application/json", strings.NewReader(`{"model":"fake-text"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); resp.StatusCode != 200 || !strings.Contains(got, "FAKE-OK") {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	for _, bad := range []string{"/", "/~x~y~z/anthropic/v1/messages", "/~bad id~/anthropic/v1/messages"} {
		resp, err := http.Post(fw.URL+bad, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if body(t, resp); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d", bad, resp.StatusCode)
		}
	}
}

// Usage reads the model entries back: calls, tokens and cost by model,
// denials apart.
func TestUsage(t *testing.T) {
	h := newHarness(t, `providers: [anthropic, openai], allow: ["fake-*"]`)
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`))
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-tool","max_tokens":5,"stream":true}`))
	body(t, h.post(t, "demo", "openai", "/v1/chat/completions", `{"model":"fake-text"}`))
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"claude-opus","max_tokens":5}`))
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-429","max_tokens":5}`))
	const garbage = `{"model":"fake-garbage","max_tokens":5}`
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", garbage))
	h.aw.Close()
	rows, err := Usage(filepath.Join(h.dir, "logs"), "demo", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	byModel := map[string]UsageRow{}
	for _, r := range rows {
		byModel[r.Provider+"/"+r.Model] = r
	}
	cost := (fakeprovider.InputTokens*3 + fakeprovider.OutputTokens*15 + fakeprovider.CacheRead*0.3) / 1e6
	if r := byModel["anthropic/fake-text"]; r.Calls != 1 || r.Input != fakeprovider.InputTokens || r.Output != fakeprovider.OutputTokens || r.CostUSD-cost > 1e-12 || cost-r.CostUSD > 1e-12 {
		t.Fatalf("fake-text: %+v", r)
	}
	if r := byModel["openai/fake-text"]; r.Calls != 1 || r.Unpriced != 1 || r.CacheRead != fakeprovider.CacheRead {
		t.Fatalf("openai: %+v", r)
	}
	if r := byModel["anthropic/claude-opus"]; r.Denied != 1 || r.Calls != 0 {
		t.Fatalf("denied: %+v", r)
	}
	if r := byModel["anthropic/fake-429"]; r.Calls != 1 || r.Errors != 1 || r.Input != 0 || r.Estimated != 0 {
		t.Fatalf("429: %+v", r)
	}
	if r := byModel["anthropic/fake-garbage"]; r.Calls != 1 || r.Input != 0 || r.Estimated != 5+int64(len(garbage)+3)/4 || r.EstimatedCostUSD == 0 {
		t.Fatalf("garbage: %+v", r)
	}
	if rows, _ := Usage(filepath.Join(h.dir, "logs"), "other", time.Time{}); len(rows) != 0 {
		t.Fatalf("other agent: %+v", rows)
	}
}

// A model entry read back from the audit log is decided again on its
// recorded facts (replay): the same decision, nothing measured anew.
func TestRecordedCallsDecideAgain(t *testing.T) {
	h := newHarness(t, `providers: [anthropic], allow: ["fake-*"], budget: {tokensPerHour: 100}`)
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`))
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"fake-text","max_tokens":5}`))
	body(t, h.post(t, "demo", "anthropic", "/v1/messages", `{"model":"claude-x","max_tokens":5}`))
	h.aw.Close()
	snap := h.gw.Snapshot()
	n := 0
	for _, e := range h.entries(t) {
		if e.Phase != gateway.PhaseDecision {
			continue
		}
		n++
		if _, ok := e.Detail["spent"]; !ok || e.Detail["model"] == nil || e.Detail["api"] != "anthropic" {
			t.Fatalf("entry %s does not record the facts policy read: %v", e.ID, e.Detail)
		}
		call := &gateway.Call{Agent: e.Agent, Kind: e.Type, Tool: e.Tool, Args: e.Args, Detail: e.Detail}
		_, refused := gateway.Prepare(snap, call)
		if refused != nil {
			t.Fatalf("recorded call refused: %+v", refused)
		}
		if d := snap.Decider.Decide(call); d.Verdict() != e.Decision || d.Rule != e.Rule {
			t.Fatalf("entry %s was %s by %s, now %+v", e.ID, e.Decision, e.Rule, d)
		}
	}
	if n != 3 {
		t.Fatalf("%d decisions", n)
	}
	// And such a call cannot run.
	call := &gateway.Call{Agent: "demo", Kind: gateway.KindModel, Tool: "anthropic", Args: []byte(`{"provider":"anthropic","endpoint":"messages","model":"fake-text"}`)}
	if _, err := snap.ByKind[gateway.KindModel].Run(context.Background(), call, nil); err == nil {
		t.Fatal("a recorded call ran")
	}
}

// An in-process caller that closes the answer early gets its Close at
// once; the door reads the answer on for its usage and then records the
// result, the client's leaving and the measured tokens.
func TestSendClosedEarly(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Chunks, h.fake.Gap = 200, 5*time.Millisecond
	resp, err := h.door.Send(context.Background(), &Request{Agent: "demo", Provider: "openai", Path: "/v1/chat/completions",
		Body: []byte(`{"model":"fake-slow","stream":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d upstream requests", n)
	}
	e := h.waitResults(t, 1)[0]
	if !strings.Contains(e.Error, "client went away") || e.Detail["usage"] != "measured" || num(e.Detail["outputTokens"]) != 200 {
		t.Fatalf("%+v", e)
	}
	if r := h.fake.Requests()[0]; !r.Finished {
		t.Fatal("the door stopped reading when the caller closed")
	}
}
