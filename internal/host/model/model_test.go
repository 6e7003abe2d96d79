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
	t.Parallel()
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
	t.Parallel()
	webSearch := ServerTool{Kind: "web_search", Type: "web_search_20250305", Name: "web_search"}
	for _, c := range []struct {
		name string
		ep   Endpoint
		body string
		want Facts
		err  string
	}{
		{"anthropic", Messages, `{"model":"claude-x","max_tokens":1024,"stream":true,"tools":[{"name":"Bash","input_schema":{}},{"type":"web_search_20250305","name":"web_search"}],"messages":[]}`,
			Facts{Model: "claude-x", MaxTokens: 1024, Stream: true, Tools: []string{"Bash", "web_search"}, ServerTools: []ServerTool{webSearch}}, ""},
		{"anthropic without max_tokens", Messages, `{"model":"claude-x","messages":[]}`, Facts{}, "needs max_tokens"},
		{"count tokens", CountTokens, `{"model":"claude-x","messages":[]}`, Facts{Model: "claude-x"}, ""},
		{"chat", ChatCompletions, `{"model":"gpt-x","max_completion_tokens":16384,"tools":[{"type":"function","function":{"name":"bash"}}],"stream":false}`,
			Facts{Model: "gpt-x", MaxTokens: 16384, Tools: []string{"bash"}}, ""},
		{"responses", Responses, `{"model":"gpt-5","input":[],"tools":[{"type":"function","name":"exec_command"},{"type":"web_search"}],"stream":true,"max_output_tokens":5}`,
			Facts{Model: "gpt-5", MaxTokens: 5, Stream: true, Tools: []string{"exec_command", "web_search"}, ServerTools: []ServerTool{{Kind: "web_search", Type: "web_search", Name: "web_search"}}}, ""},
		{"no model", ChatCompletions, `{"messages":[]}`, Facts{}, "names no model"},
		{"null model", ChatCompletions, `{"model":null}`, Facts{}, "names no model"},
		{"model not a string", ChatCompletions, `{"model":["a"]}`, Facts{}, "the body.model is not a string"},
		{"not an object", ChatCompletions, `["model"]`, Facts{}, "not a JSON object"},
		{"two values", ChatCompletions, `{"model":"a"} {"model":"b"}`, Facts{}, "not valid JSON"},
		{"trailing garbage", ChatCompletions, `{"model":"a"}x`, Facts{}, "not valid JSON"},
		{"truncated", ChatCompletions, `{"model":"sk-secret`, Facts{}, "ends early"},
		{"syntax", ChatCompletions, `{"model":"sk-secret" x}`, Facts{}, "syntax error"},
		{"not UTF-8", ChatCompletions, "{\"model\":\"claude-opus\xff\"}", Facts{}, "not UTF-8"},
		{"lone surrogate", ChatCompletions, `{"model":"claude-opus\ud800"}`, Facts{}, "the body.model is not a string"},
		{"tools wrong", Messages, `{"model":"a","max_tokens":1,"tools":{"name":"x"}}`, Facts{}, "the body.tools is not a list"},
		{"tool not an object", Messages, `{"model":"a","max_tokens":1,"tools":["Bash"]}`, Facts{}, "tools[0] is not a JSON object"},
		{"nameless tool", Messages, `{"model":"a","max_tokens":1,"tools":[{}]}`, Facts{}, "tools[0] has neither a name nor a type"},
		{"duplicate key", ChatCompletions, `{"model":"cheap","messages":[],"model":"dear"}`, Facts{}, "names the field \"model\" twice"},
		{"duplicate key in a tool", ChatCompletions, `{"model":"m","tools":[{"type":"function","function":{"name":"a","name":"b"}}]}`, Facts{}, "tools[0].function names the field \"name\" twice"},
		{"negative", Messages, `{"model":"a","max_tokens":-1}`, Facts{}, "negative"},
		{"limit not an integer", Messages, `{"model":"a","max_tokens":1.5}`, Facts{}, "the body.max_tokens has the wrong type"},
		{"stream as a string", ChatCompletions, `{"model":"a","stream":"true"}`, Facts{}, "the body.stream has the wrong type"},
		{"escaped key", ChatCompletions, `{"mod\u0065l":"gpt-x"}`, Facts{Model: "gpt-x"}, ""},
		{"unread keys may differ in case", ChatCompletions, `{"model":"gpt-x","Messages":[],"MESSAGES":[]}`, Facts{Model: "gpt-x"}, ""},

		// Keys a case-insensitive reader (encoding/json) takes for one the
		// door reads, at every level the door reads: refused, whatever the
		// order, so policy and provider cannot read different requests.
		{"folded model", ChatCompletions, `{"model":"gpt-cheap","Model":"gpt-dear"}`, Facts{}, `the field "Model", which a case-insensitive reader takes for "model"`},
		{"folded model first", ChatCompletions, `{"MODEL":"gpt-dear","model":"gpt-cheap"}`, Facts{}, `takes for "model"`},
		{"folded stream", ChatCompletions, `{"model":"m","stream":true,"STREAM":false}`, Facts{}, `takes for "stream"`},
		{"unicode fold: long s", ChatCompletions, `{"model":"m","\u017ftream":false}`, Facts{}, `takes for "stream"`},
		{"unicode fold: kelvin", Messages, "{\"model\":\"m\",\"max_to\u212aens\":1,\"max_tokens\":2}", Facts{}, `takes for "max_tokens"`},
		{"folded tools", Messages, `{"model":"m","max_tokens":1,"Tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`, Facts{}, `takes for "tools"`},
		{"folded tool type", Messages, `{"model":"m","max_tokens":1,"tools":[{"name":"x","Type":"web_fetch_20250910"}]}`, Facts{}, `tools[0] has the field "Type"`},
		{"folded function name", ChatCompletions, `{"model":"m","tools":[{"type":"function","function":{"name":"a","NAME":"b"}}]}`, Facts{}, `tools[0].function has the field "NAME"`},
		{"folded mcp_servers", Messages, `{"model":"m","max_tokens":1,"MCP_servers":[]}`, Facts{}, `takes for "mcp_servers"`},
		{"folded server url", Responses, `{"model":"m","tools":[{"type":"mcp","server_label":"x","server_url":"https://ok.example/mcp","Server_URL":"https://evil.example/mcp"}]}`, Facts{}, `takes for "server_url"`},
		{"folded mcp url", Messages, `{"model":"m","max_tokens":1,"mcp_servers":[{"type":"url","name":"x","url":"https://ok.example/","URL":"https://evil.example/"}]}`, Facts{}, `mcp_servers[0] has the field "URL"`},
		{"folded stream options", ChatCompletions, `{"model":"m","Stream_Options":{}}`, Facts{}, `takes for "stream_options"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRequest(c.ep, []byte(c.body))
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

// Provider-side tools and connectors, in each API's own shape (from the
// Anthropic and OpenAI SDKs' request types), become server tool facts:
// kind, type, name, URL and host; client tools do not.
func TestServerTools(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		ep   Endpoint
		body string
		want []ServerTool
		err  string
	}{
		{"anthropic client tools", Messages, `{"model":"m","max_tokens":1,"tools":[{"name":"Bash","input_schema":{}},{"type":"custom","name":"x"},` +
			`{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"computer_20250124","name":"computer","display_width_px":1},{"type":"memory_20250818","name":"memory"}]}`, nil, ""},
		{"anthropic server tools", Messages, `{"model":"m","max_tokens":1,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","allowed_domains":["docs.example.com"]},` +
			`{"type":"code_execution_20250825","name":"code_execution"},{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"},{"type":"browser_toolset_20260801"}]}`,
			[]ServerTool{{Kind: "web_fetch", Type: "web_fetch_20250910", Name: "web_fetch", Domains: []string{"docs.example.com"}},
				{Kind: "code_execution", Type: "code_execution_20250825", Name: "code_execution"},
				{Kind: "tool_search", Type: "tool_search_tool_regex_20251119", Name: "tool_search_tool_regex"},
				{Kind: "browser_toolset", Type: "browser_toolset_20260801", Name: "browser_toolset_20260801"}}, ""},
		{"anthropic MCP connector", Messages, `{"model":"m","max_tokens":1,"mcp_servers":[{"type":"url","url":"https://MCP.Example.com/sse?k=v","name":"ex","authorization_token":"tok"}],` +
			`"tools":[{"type":"mcp_toolset","mcp_server_name":"ex"}]}`,
			[]ServerTool{{Kind: "mcp", Type: "mcp_toolset", Name: "ex"}, {Kind: "mcp", Type: "mcp_servers", Name: "ex", URL: "https://MCP.Example.com/sse?k=v", Host: "mcp.example.com:443"}}, ""},
		{"count_tokens reads the connector too", CountTokens, `{"model":"m","mcp_servers":[{"type":"url","url":"http://10.0.0.1:8080/","name":"in"}]}`,
			[]ServerTool{{Kind: "mcp", Type: "mcp_servers", Name: "in", URL: "http://10.0.0.1:8080/", Host: "10.0.0.1:8080"}}, ""},
		{"MCP server without a URL", Messages, `{"model":"m","max_tokens":1,"mcp_servers":[{"type":"url","name":"x"}]}`, nil, "mcp_servers[0].url is missing"},
		{"MCP server URL not http", Messages, `{"model":"m","max_tokens":1,"mcp_servers":[{"type":"url","url":"file:///etc/passwd","name":"x"}]}`, nil, "not an absolute http(s) URL"},
		{"MCP server URL with a password", Messages, `{"model":"m","max_tokens":1,"mcp_servers":[{"type":"url","url":"https://u:p@h.example/","name":"x"}]}`, nil, "carries credentials"},
		{"openai chat client tools", ChatCompletions, `{"model":"m","tools":[{"type":"function","function":{"name":"f"}},{"type":"custom","custom":{"name":"g"}}]}`, nil, ""},
		{"openai chat web search option", ChatCompletions, `{"model":"m","web_search_options":{}}`,
			[]ServerTool{{Kind: "web_search", Type: "web_search_options", Name: "web_search_options"}}, ""},
		{"openai chat unknown tool type", ChatCompletions, `{"model":"m","tools":[{"type":"retrieval"}]}`,
			[]ServerTool{{Kind: "retrieval", Type: "retrieval", Name: "retrieval"}}, ""},
		{"responses hosted tools", Responses, `{"model":"m","tools":[{"type":"web_search_preview_2025_03_11"},{"type":"file_search","vector_store_ids":["vs_1"]},` +
			`{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation"},{"type":"web_search","filters":{"allowed_domains":["a.example"]}}]}`,
			[]ServerTool{{Kind: "web_search", Type: "web_search_preview_2025_03_11", Name: "web_search_preview_2025_03_11"},
				{Kind: "file_search", Type: "file_search", Name: "file_search"},
				{Kind: "code_execution", Type: "code_interpreter", Name: "code_interpreter"},
				{Kind: "image_generation", Type: "image_generation", Name: "image_generation"},
				{Kind: "web_search", Type: "web_search", Name: "web_search", Domains: []string{"a.example"}}}, ""},
		{"responses MCP", Responses, `{"model":"m","tools":[{"type":"mcp","server_label":"deepwiki","server_url":"https://mcp.deepwiki.com/mcp","require_approval":"never","headers":{"Authorization":"Bearer x"}},` +
			`{"type":"mcp","server_label":"mail","connector_id":"connector_gmail","authorization":"tok"}]}`,
			[]ServerTool{{Kind: "mcp", Type: "mcp", Name: "deepwiki", URL: "https://mcp.deepwiki.com/mcp", Host: "mcp.deepwiki.com:443"},
				{Kind: "mcp", Type: "mcp", Name: "mail", Connector: "connector_gmail"}}, ""},
		{"responses client tools", Responses, `{"model":"m","tools":[{"type":"function","name":"f"},{"type":"custom","name":"c"},{"type":"local_shell"},{"type":"apply_patch"},` +
			`{"type":"computer_use_preview","display_width":1},{"type":"shell"},{"type":"shell","environment":{"type":"local"}},{"type":"namespace","name":"crm","tools":[]}]}`, nil, ""},
		{"responses hosted shell", Responses, `{"model":"m","tools":[{"type":"shell","environment":{"type":"container_auto"}}]}`,
			[]ServerTool{{Kind: "shell", Type: "shell", Name: "shell"}}, ""},
		{"responses stored prompt", Responses, `{"model":"m","prompt":{"id":"pmpt_1","version":"2"}}`,
			[]ServerTool{{Kind: "prompt", Type: "prompt", Name: "pmpt_1"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRequest(c.ep, []byte(c.body))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.ServerTools, c.want) {
				t.Fatalf("server tools %+v, %v; want %+v", got.ServerTools, err, c.want)
			}
		})
	}
}

func TestWithStreamUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want, err string }{
		{`{"model":"m","stream":true,"messages":[{"content":"<b>&</b>"}]}`,
			`{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[{"content":"<b>&</b>"}]}`, ""},
		// Asked for false: usage is still needed for the budget; the rest
		// of the object, and of the body, stays byte for byte.
		{`{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true,"x":1}}`, ""},
		{` { "model":"m","stream":true,"stream_options": { } } `, ` { "model":"m","stream":true,"stream_options": {"include_usage":true } } `, ""},
		{`{"model":"m","stream":true,"stream_options":null}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, ""},
		{`{"model":"m","stream":true,"stream_options":{"x":"\u00e9"}}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true,"x":"\u00e9"}}`, ""},
		// Not streamed, or already asked: unchanged.
		{`{"model":"m"}`, `{"model":"m"}`, ""},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, ""},
		// What a provider and a case-insensitive reader would read apart.
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true,"include_usage":false}}`, "", "names the field \"include_usage\" twice"},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true,"Include_Usage":false}}`, "", `takes for "include_usage"`},
		{`{"model":"m","stream":true,"stream_options":"yes"}`, "", "stream_options is not a JSON object"},
	} {
		f, err := ParseRequest(ChatCompletions, []byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		out, err := WithStreamUsage(ChatCompletions, []byte(c.in), f)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(out) != c.want {
			t.Errorf("%s became %s (%v), want %s", c.in, out, err, c.want)
		}
	}
}

func TestParseResponse(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
