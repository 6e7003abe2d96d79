package model

import (
	"cmp"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// Whatever ParseRequest accepts has a short UTF-8 model and tool names and
// no negative limit; nothing panics. And it is what the provider reads:
// the facts equal those of an exact-key reading (generic maps: keys as
// written, the last of two equal keys winning, as the providers' JSON
// readers do) and those of a case-insensitive one (encoding/json structs,
// which fold keys: "Model", "ſtream"). A body on which readers can differ
// is refused, never accepted with the facts of one of them.
// WithStreamUsage changes exactly stream_options.include_usage.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-x","max_tokens":1024,"stream":true,"tools":[{"name":"Bash"}]}`,
		`{"model":"gpt","tools":[{"type":"function","function":{"name":"bash"}}],"max_completion_tokens":3}`,
		`{"model":"gpt-5","tools":[{"type":"web_search"}],"max_output_tokens":1}`,
		`{"model":null}`, `[]`, `{"model":"a","tools":null}`, `{"model":"\ud800"}`, ``,
		`{"model":"cheap","Model":"dear"}`, `{"model":"m","stream":true,"STREAM":false}`, `{"model":"m","\u017ftream":true}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":false,"Include_usage":true}}`,
		`{"model":"m","stream":true,"stream_options":null,"messages":[{"content":"<&>"}]}`,
		`{"mod\u0065l":"m","max_tokens":2,"mcp_servers":[{"type":"url","url":"https://h.example/s","name":"n"}]}`,
		`{"model":"m","tools":[{"type":"mcp","server_label":"l","server_url":"https://a.example:8443/x"},{"type":"function","function":{"name":"f","NAME":"g"}}]}`,
		`{"model":"m","max_tokens":1,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","allowed_domains":["x.example"]}]}`,
	} {
		for ep := range uint8(4) {
			f.Add(ep, []byte(s))
		}
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
		if exact := exactFacts(t, ep, body); !reflect.DeepEqual(exact, sansDetail(facts)) {
			t.Fatalf("ParseRequest(%s, %q) = %+v; an exact-key reader reads %+v", ep, body, sansDetail(facts), exact)
		}
		if folded := foldedFacts(body); !reflect.DeepEqual(folded, sansServer(facts)) {
			t.Fatalf("ParseRequest(%s, %q) = %+v; a case-insensitive reader reads %+v", ep, body, sansServer(facts), folded)
		}
		out, err := WithStreamUsage(ep, body, facts)
		if err != nil {
			return
		}
		again, err := ParseRequest(ep, out)
		if err != nil || !reflect.DeepEqual(again, facts) {
			t.Fatalf("WithStreamUsage(%q) = %q, read as %+v, %v; want %+v", body, out, again, err, facts)
		}
		if string(out) == string(body) {
			return
		}
		var in, got map[string]json.RawMessage
		if json.Unmarshal(body, &in) != nil || json.Unmarshal(out, &got) != nil || len(got) != len(in)+btoi(in["stream_options"] == nil) {
			t.Fatalf("WithStreamUsage(%q) = %q", body, out)
		}
		for k, v := range in {
			if k != "stream_options" && string(got[k]) != string(v) {
				t.Fatalf("WithStreamUsage changed %q: %s became %s", k, v, got[k])
			}
		}
		var opts map[string]any
		if json.Unmarshal(got["stream_options"], &opts) != nil || opts["include_usage"] != true {
			t.Fatalf("WithStreamUsage(%q) = %q: no include_usage", body, out)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sansDetail keeps the facts both test readers compare: the server tools'
// kinds are classification, not reading, so they are left to TestServerTools.
func sansDetail(f Facts) Facts {
	g := f
	g.ServerTools = nil
	for _, st := range f.ServerTools {
		g.ServerTools = append(g.ServerTools, ServerTool{Name: st.Name, URL: st.URL, Connector: st.Connector})
	}
	return g
}

func sansServer(f Facts) Facts {
	f.ServerTools = nil
	return f
}

// exactFacts reads a body as the providers do: generic maps, so keys
// match exactly and the last of two equal keys wins.
func exactFacts(t *testing.T, ep Endpoint, body []byte) Facts {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		t.Fatalf("%q accepted, but not JSON to a generic reader: %v", body, err)
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	var f Facts
	f.Model = str(top, "model")
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if n, ok := top[k].(json.Number); ok {
			v, _ := n.Int64()
			f.MaxTokens = max(f.MaxTokens, v)
		}
	}
	f.Stream, _ = top["stream"].(bool)
	tools, _ := top["tools"].([]any)
	for _, x := range tools {
		tool, _ := x.(map[string]any)
		name := str(tool, "name")
		for _, inner := range []string{"function", "custom"} {
			if fn, ok := tool[inner].(map[string]any); ok && str(fn, "name") != "" {
				name = str(fn, "name")
			}
		}
		if name == "" {
			name = str(tool, "type")
		}
		f.Tools = append(f.Tools, name)
	}
	// The server tools' names and where they reach, in the order the door
	// lists them: tools first, then Anthropic's mcp_servers, then options.
	for i, x := range tools {
		tool, _ := x.(map[string]any)
		typ := str(tool, "type")
		kind := KindOf(typ)
		if typ == "" {
			kind = "custom"
		}
		if env, _ := tool["environment"].(map[string]any); kind == "shell" && (env == nil || str(env, "type") == "" || str(env, "type") == "local") {
			continue
		}
		if clientKinds[ep.api()][kind] {
			continue
		}
		st := ServerTool{Name: f.Tools[i]}
		if kind == "mcp" {
			st.Name = cmp.Or(str(tool, "mcp_server_name"), str(tool, "server_label"), st.Name)
			st.Connector, st.URL = cmp.Or(str(tool, "tunnel_id"), str(tool, "connector_id")), str(tool, "server_url")
		}
		f.ServerTools = append(f.ServerTools, st)
	}
	if ep.api() == Anthropic {
		servers, _ := top["mcp_servers"].([]any)
		for _, x := range servers {
			s, _ := x.(map[string]any)
			f.ServerTools = append(f.ServerTools, ServerTool{Name: str(s, "name"), URL: str(s, "url")})
		}
	}
	if _, ok := top["web_search_options"]; ok && top["web_search_options"] != nil && ep == ChatCompletions {
		f.ServerTools = append(f.ServerTools, ServerTool{Name: "web_search_options"})
	}
	if p, ok := top["prompt"].(map[string]any); ok && ep == Responses {
		f.ServerTools = append(f.ServerTools, ServerTool{Name: str(p, "id")})
	}
	return f
}

// foldedFacts reads a body with encoding/json's structs, which match keys
// case-insensitively and keep the last match.
func foldedFacts(body []byte) Facts {
	var r struct {
		Model               string `json:"model"`
		MaxTokens           int64  `json:"max_tokens"`
		MaxCompletionTokens int64  `json:"max_completion_tokens"`
		MaxOutputTokens     int64  `json:"max_output_tokens"`
		Stream              bool   `json:"stream"`
		Tools               []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
			Custom struct {
				Name string `json:"name"`
			} `json:"custom"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &r)
	f := Facts{Model: r.Model, MaxTokens: max(r.MaxTokens, r.MaxCompletionTokens, r.MaxOutputTokens), Stream: r.Stream}
	for _, t := range r.Tools {
		f.Tools = append(f.Tools, cmp.Or(t.Custom.Name, t.Function.Name, t.Name, t.Type))
	}
	return f
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
