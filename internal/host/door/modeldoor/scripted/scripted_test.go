package scripted

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A script that cannot be played is refused with where it is wrong.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"turns: []", "no turns"},
		{"turns:\n  - expect: x\n", "says nothing"},
		{"turns:\n  - say: hi\n    tools:\n      - input: {a: 1}\n", "tools[0]: no name"},
		{"turns:\n  - say: hi\n    bogus: 1\n", "bogus"},
		{"nope", "cannot unmarshal"},
	} {
		if _, err := Parse([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := Load("/nonexistent/turns.yaml"); err == nil {
		t.Error("a missing script file loaded")
	}
}

// The turn answered is the number of model turns in the request, in both
// shapes; a previous result without what the turn expects stops the script
// with what it got instead.
func TestTurns(t *testing.T) {
	s, err := Parse([]byte("turns:\n  - say: one\n    tools: [{name: exec, input: {command: ls}}]\n  - expect: total\n    say: two\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(path, body string) map[string]any {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, err)
		}
		return m
	}
	first := post("/v1/messages", `{"messages":[{"role":"user","content":"go"}]}`)
	if first["stop_reason"] != "tool_use" {
		t.Fatalf("%v", first)
	}
	ok := post("/v1/messages", `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"total 0"}]}]}`)
	if text := ok["content"].([]any)[0].(map[string]any)["text"]; text != "two" {
		t.Fatalf("%v", ok)
	}
	bad := post("/v1/chat/completions", `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":""},
		{"role":"tool","tool_call_id":"c","content":"no such file"}]}`)
	msg := bad["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	if !strings.Contains(msg, `expected the last tool results to contain "total"`) || !strings.Contains(msg, "no such file") {
		t.Fatalf("%q", msg)
	}
	past := post("/v1/messages", `{"messages":[{"role":"assistant","content":[]},{"role":"assistant","content":[]},{"role":"assistant","content":[]}]}`)
	if text := past["content"].([]any)[0].(map[string]any)["text"].(string); !strings.Contains(text, "no more turns") {
		t.Fatalf("%v", past)
	}
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != 404 {
		t.Fatalf("responses: %v %v", resp, err)
	}
	resp.Body.Close()
}
