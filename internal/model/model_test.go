package model

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEndpointOf(t *testing.T) {
	for _, c := range []struct {
		api          API
		method, path string
		want         Endpoint
		ok           bool
	}{
		{Anthropic, "POST", "/v1/messages", Messages, true},
		{Anthropic, "POST", "/v1/messages/count_tokens", CountTokens, true},
		{Anthropic, "GET", "/v1/messages", "", false},
		{Anthropic, "POST", "/v1/chat/completions", "", false},
		{OpenAI, "POST", "/v1/chat/completions", ChatCompletions, true},
		{OpenAI, "POST", "/v1/responses/", Responses, true},
		{OpenAI, "POST", "/v1/messages", "", false},
		{OpenAI, "POST", "/v1/../v1/responses", "", false},
	} {
		got, ok := EndpointOf(c.api, c.method, c.path)
		if got != c.want || ok != c.ok {
			t.Errorf("EndpointOf(%s, %s %s) = %q, %v; want %q, %v", c.api, c.method, c.path, got, ok, c.want, c.ok)
		}
	}
}

func TestParseRequest(t *testing.T) {
	for _, c := range []struct {
		name string
		ep   Endpoint
		body string
		want Facts
		err  string
	}{
		{"anthropic", Messages, `{"model":"claude-x","max_tokens":1024,"stream":true,"tools":[{"name":"Bash","input_schema":{}},{"type":"web_search_20250305","name":"web_search"}],"messages":[]}`,
			Facts{Model: "claude-x", MaxTokens: 1024, Stream: true, Tools: []string{"Bash", "web_search"}}, ""},
		{"anthropic without max_tokens", Messages, `{"model":"claude-x","messages":[]}`, Facts{}, "needs max_tokens"},
		{"count tokens", CountTokens, `{"model":"claude-x","messages":[]}`, Facts{Model: "claude-x"}, ""},
		{"chat", ChatCompletions, `{"model":"gpt-x","max_completion_tokens":16384,"tools":[{"type":"function","function":{"name":"bash"}}],"stream":false}`,
			Facts{Model: "gpt-x", MaxTokens: 16384, Tools: []string{"bash"}}, ""},
		{"responses", Responses, `{"model":"gpt-5","input":[],"tools":[{"type":"function","name":"exec_command"},{"type":"web_search"}],"stream":true,"max_output_tokens":5}`,
			Facts{Model: "gpt-5", MaxTokens: 5, Stream: true, Tools: []string{"exec_command", "web_search"}}, ""},
		{"no model", ChatCompletions, `{"messages":[]}`, Facts{}, "names no model"},
		{"not an object", ChatCompletions, `["model"]`, Facts{}, "not a JSON object"},
		{"two values", ChatCompletions, `{"model":"a"} {"model":"b"}`, Facts{}, "more than one"},
		{"trailing garbage", ChatCompletions, `{"model":"a"}x`, Facts{}, ""},
		{"truncated", ChatCompletions, `{"model":"sk-secret`, Facts{}, "ends early"},
		{"syntax", ChatCompletions, `{"model":"sk-secret" x}`, Facts{}, "syntax error"},
		{"tools wrong", Messages, `{"model":"a","max_tokens":1,"tools":{"name":"x"}}`, Facts{}, "tools is not a list"},
		{"nameless tool", Messages, `{"model":"a","max_tokens":1,"tools":[{}]}`, Facts{}, "without a short"},
		{"duplicate key", ChatCompletions, `{"model":"cheap","messages":[],"model":"dear"}`, Facts{}, "names the field \"model\" twice"},
		{"negative", Messages, `{"model":"a","max_tokens":-1}`, Facts{}, "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRequest(c.ep, []byte(c.body))
			if c.name == "trailing garbage" {
				if err == nil {
					t.Fatalf("accepted %q", c.body)
				}
				return
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrBadRequest) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				if strings.Contains(err.Error(), "sk-secret") {
					t.Fatalf("error quotes the body: %v", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseRequest = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestWithStreamUsage(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[]}`)
	f, _ := ParseRequest(ChatCompletions, body)
	out, err := WithStreamUsage(ChatCompletions, body, f)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if so, _ := m["stream_options"].(map[string]any); so["include_usage"] != true || m["model"] != "m" {
		t.Fatalf("rewritten body %s", out)
	}
	// Asked for false: usage is still needed for the budget.
	body = []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}}`)
	out, _ = WithStreamUsage(ChatCompletions, body, f)
	if !strings.Contains(string(out), `"include_usage":true`) || !strings.Contains(string(out), `"x":1`) {
		t.Fatalf("rewritten body %s", out)
	}
	// Not streamed, or already asked: unchanged.
	for _, b := range []string{`{"model":"m"}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`} {
		f, _ := ParseRequest(ChatCompletions, []byte(b))
		out, _ := WithStreamUsage(ChatCompletions, []byte(b), f)
		if string(out) != b {
			t.Fatalf("%s became %s", b, out)
		}
	}
}

func TestParseResponse(t *testing.T) {
	for _, c := range []struct {
		name string
		ep   Endpoint
		body string
		want Outcome
	}{
		{"anthropic tool use", Messages, `{"id":"msg_1","model":"claude-x","stop_reason":"tool_use","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}],"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":7}}`,
			Outcome{Model: "claude-x", StopReason: "tool_use", ToolUseIDs: []string{"toolu_1"}, HasUsage: true, Usage: Usage{Input: 10, Output: 5, CacheRead: 100, CacheWrite: 7}}},
		{"chat tool calls", ChatCompletions, `{"model":"gpt-x","choices":[{"finish_reason":"tool_calls","message":{"tool_calls":[{"id":"call_1"},{"id":"call_2"}]}}],"usage":{"prompt_tokens":50,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":20}}}`,
			Outcome{Model: "gpt-x", StopReason: "tool_calls", ToolUseIDs: []string{"call_1", "call_2"}, HasUsage: true, Usage: Usage{Input: 30, Output: 9, CacheRead: 20}}},
		{"responses", Responses, `{"model":"gpt-5","status":"completed","output":[{"type":"message"},{"type":"function_call","call_id":"call_9"}],"usage":{"input_tokens":40,"output_tokens":3,"input_tokens_details":{"cached_tokens":50}}}`,
			Outcome{Model: "gpt-5", StopReason: "completed", ToolUseIDs: []string{"call_9"}, HasUsage: true, Usage: Usage{Input: 0, Output: 3, CacheRead: 40}}},
		{"count tokens", CountTokens, `{"input_tokens":12}`, Outcome{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseResponse(c.ep, []byte(c.body))
			if !ok || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseResponse = %+v, %v; want %+v", got, ok, c.want)
			}
		})
	}
	if _, ok := ParseResponse(Messages, []byte("<html>bad gateway</html>")); ok {
		t.Fatal("garbage read as an answer")
	}
}

const anthropicSSE = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","model":"claude-x","content":[],"usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":3}}}` + "\n\n" +
	"event: content_block_start\r\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_A","name":"Bash","input":{}}}` + "\r\n\r\n" +
	": ping comment\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

const chatSSE = `data: {"model":"gpt-x","choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"bash"}}]}}]}` + "\n\n" +
	`data: {"model":"gpt-x","choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}` + "\n\n" +
	`data: {"model":"gpt-x","choices":[{"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
	`data: {"model":"gpt-x","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":4}}` + "\n\n" +
	"data: [DONE]\n\n"

const responsesSSE = "event: response.created\n" + `data: {"type":"response.created","response":{"model":"gpt-5","status":"in_progress"}}` + "\n\n" +
	"event: response.output_item.added\n" + `data: {"type":"response.output_item.added","item":{"type":"function_call","call_id":"call_fake1","name":"exec_command"}}` + "\n\n" +
	"event: response.completed\n" + `data: {"type":"response.completed","response":{"model":"gpt-5","status":"completed","output":[{"type":"function_call","call_id":"call_fake1"}],"usage":{"input_tokens":100,"output_tokens":7}}}` + "\n\n"

func TestStream(t *testing.T) {
	for _, c := range []struct {
		name string
		ep   Endpoint
		sse  string
		want Outcome
	}{
		{"anthropic", Messages, anthropicSSE, Outcome{Model: "claude-x", StopReason: "tool_use", ToolUseIDs: []string{"toolu_A"}, HasUsage: true, Usage: Usage{Input: 25, Output: 42, CacheRead: 3}}},
		{"chat", ChatCompletions, chatSSE, Outcome{Model: "gpt-x", StopReason: "tool_calls", ToolUseIDs: []string{"call_1"}, HasUsage: true, Usage: Usage{Input: 11, Output: 4}}},
		{"responses", Responses, responsesSSE, Outcome{Model: "gpt-5", StopReason: "completed", ToolUseIDs: []string{"call_fake1"}, HasUsage: true, Usage: Usage{Input: 100, Output: 7}}},
	} {
		// Fed whole, and one byte at a time: event boundaries inside a
		// write must not matter.
		for _, chunk := range []int{len(c.sse), 1, 7} {
			s := NewStream(c.ep)
			for i := 0; i < len(c.sse); i += chunk {
				s.Write([]byte(c.sse[i:min(i+chunk, len(c.sse))]))
			}
			s.Close()
			if got := s.Outcome(); !reflect.DeepEqual(got, c.want) || !s.Done() {
				t.Fatalf("%s (chunks of %d): %+v done=%v; want %+v", c.name, chunk, got, s.Done(), c.want)
			}
		}
	}
}

func TestStreamCutAndErrors(t *testing.T) {
	s := NewStream(Messages)
	s.Write([]byte(anthropicSSE[:strings.Index(anthropicSSE, "event: message_delta")]))
	s.Close()
	if s.Done() || s.Outcome().Usage.Input != 25 {
		t.Fatalf("cut stream: done=%v %+v", s.Done(), s.Outcome())
	}
	s = NewStream(Messages)
	s.Write([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	if got := s.Outcome().Error; got != "overloaded_error: Overloaded" {
		t.Fatalf("error = %q", got)
	}
	// An oversized event is skipped, later ones still read.
	s = NewStream(ChatCompletions)
	s.Write([]byte("data: " + strings.Repeat("x", maxEventBytes+10) + "\n\n"))
	s.Write([]byte(`data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}` + "\n\n"))
	if got := s.Outcome().Usage; got.Output != 2 {
		t.Fatalf("usage after an oversized event: %+v", got)
	}
}

func TestPrices(t *testing.T) {
	ps := Prices{"claude-*": {Input: 1}, "claude-sonnet-4*": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, "gpt-5": {Input: 2}}
	p, ok := ps.Lookup("claude-sonnet-4-5")
	if !ok || p.Input != 3 {
		t.Fatalf("Lookup = %+v, %v", p, ok)
	}
	if got := p.Cost(Usage{Input: 1e6, Output: 1e6, CacheRead: 1e6, CacheWrite: 1e6}); got != 3+15+0.3+3.75 {
		t.Fatalf("cost = %v", got)
	}
	if p, _ := ps.Lookup("claude-haiku"); p.Input != 1 {
		t.Fatalf("pattern: %+v", p)
	}
	if _, ok := ps.Lookup("gpt-5-mini"); ok {
		t.Fatal("an exact entry matched another model")
	}
	if !Allowed(nil, "x") || !Allowed([]string{"claude-*"}, "claude-a") || Allowed([]string{"claude-*", "gpt-5"}, "gpt-5-mini") {
		t.Fatal("allowlist")
	}
}

func TestBudget(t *testing.T) {
	b := Budget{RequestsPerMinute: 2, TokensPerDay: 100, CostPerHour: 1}
	if _, _, ok := b.Check(Spent{Requests1m: 1, Tokens1d: 99, Cost1h: 0.5}); !ok {
		t.Fatal("under budget refused")
	}
	for _, c := range []struct {
		s    Spent
		rule string
	}{
		{Spent{Requests1m: 2, RetryAfter: 30 * time.Second}, RuleRPM},
		{Spent{Tokens1d: 100}, RuleTokens},
		{Spent{Cost1h: 1}, RuleCost},
	} {
		if rule, reason, ok := b.Check(c.s); ok || rule != c.rule || reason == "" {
			t.Fatalf("Check(%+v) = %q %q %v", c.s, rule, reason, ok)
		}
	}
	if _, _, ok := (Budget{}).Check(Spent{Requests1m: 1e6}); !ok {
		t.Fatal("an empty budget limits")
	}
}

func TestErrorBodies(t *testing.T) {
	var a struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(ErrorBody(Anthropic, 403, "denied by rule x"), &a); err != nil || a.Type != "error" || a.Error.Type != "permission_error" || a.Error.Message != "denied by rule x" {
		t.Fatalf("anthropic: %+v %v", a, err)
	}
	var o struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(ErrorBody(OpenAI, 429, "slow down"), &o); err != nil || o.Error.Message != "slow down" || o.Error.Code != "rate_limit_exceeded" {
		t.Fatalf("openai: %+v %v", o, err)
	}
	for _, ep := range []Endpoint{Messages, ChatCompletions, Responses} {
		s := NewStream(ep)
		s.Write(StreamError(ep, "upstream cut"))
		if !strings.Contains(s.Outcome().Error, "upstream cut") {
			t.Fatalf("%s: stream error not read back: %+v", ep, s.Outcome())
		}
	}
}
