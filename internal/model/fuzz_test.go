package model

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// Whatever ParseRequest accepts has a short UTF-8 model and tool names and
// no negative limit; nothing panics.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-x","max_tokens":1024,"stream":true,"tools":[{"name":"Bash"}]}`,
		`{"model":"gpt","tools":[{"type":"function","function":{"name":"bash"}}],"max_completion_tokens":3}`,
		`{"model":"gpt-5","tools":[{"type":"web_search"}],"max_output_tokens":1}`,
		`{"model":null}`, `[]`, `{"model":"a","tools":null}`, `{"model":"\ud800"}`, ``,
	} {
		f.Add(uint8(0), []byte(s))
	}
	eps := []Endpoint{Messages, CountTokens, ChatCompletions, Responses}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := eps[int(which)%len(eps)]
		facts, err := ParseRequest(ep, body)
		if err != nil {
			return
		}
		if facts.Model == "" || len(facts.Model) > maxModelLen || !utf8.ValidString(facts.Model) || facts.MaxTokens < 0 || len(facts.Tools) > maxTools {
			t.Fatalf("ParseRequest(%s, %q) = %+v", ep, body, facts)
		}
		for _, n := range facts.Tools {
			if n == "" || len(n) > maxToolName || !utf8.ValidString(n) {
				t.Fatalf("tool name %q", n)
			}
		}
		out, err := WithStreamUsage(ep, body, facts)
		if err == nil && !json.Valid(out) {
			t.Fatalf("WithStreamUsage made invalid JSON of %q: %q", body, out)
		}
	})
}

// The stream scanner takes any bytes in any split: it never panics, its
// facts stay bounded, and splitting the input does not change them.
func FuzzStream(f *testing.F) {
	for _, s := range []string{anthropicSSE, chatSSE, responsesSSE, "data: [DONE]\n\n", "event: error\ndata: {}\n\n", "data:\r\n\r\n"} {
		f.Add(uint8(0), uint16(3), []byte(s))
	}
	eps := []Endpoint{Messages, ChatCompletions, Responses}
	f.Fuzz(func(t *testing.T, which uint8, split uint16, data []byte) {
		ep := eps[int(which)%len(eps)]
		whole := NewStream(ep)
		whole.Write(data)
		whole.Close()
		parts := NewStream(ep)
		cut := int(split) % (len(data) + 1)
		parts.Write(data[:cut])
		parts.Write(data[cut:])
		parts.Close()
		a, b := whole.Outcome(), parts.Outcome()
		if a.Model != b.Model || a.Usage != b.Usage || a.StopReason != b.StopReason || len(a.ToolUseIDs) != len(b.ToolUseIDs) || whole.Done() != parts.Done() {
			t.Fatalf("split at %d changed the outcome: %+v vs %+v", cut, a, b)
		}
		if len(a.ToolUseIDs) > maxToolUseIDs || a.Usage.Input < 0 || a.Usage.Output < 0 || len(a.Error) > 512 {
			t.Fatalf("unbounded outcome %+v", a)
		}
	})
}

// ParseResponse takes any bytes without panicking and keeps its bounds.
func FuzzParseResponse(f *testing.F) {
	f.Add(uint8(0), []byte(`{"model":"m","content":[{"type":"tool_use","id":"t"}],"usage":{"input_tokens":1}}`))
	f.Add(uint8(2), []byte(`{"choices":[{"message":{"tool_calls":[{"id":"c"}]}}],"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":9}}}`))
	f.Add(uint8(3), []byte(`{"output":[{"type":"function_call","call_id":"x"}],"usage":{"input_tokens":-4}}`))
	eps := []Endpoint{Messages, CountTokens, ChatCompletions, Responses}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		o, _ := ParseResponse(eps[int(which)%len(eps)], body)
		u := o.Usage
		if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 || len(o.ToolUseIDs) > maxToolUseIDs {
			t.Fatalf("outcome %+v", o)
		}
	})
}
