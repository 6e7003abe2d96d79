package agentloop

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/scripted"
	"github.com/toolgate/toolgate/internal/host/model"
)

const chooseConfig = `gateway:
  models:
    anthropic: {api: anthropic, url: https://api.anthropic.com, secret: anthropic_key}
    openai: {api: openai, url: https://api.openai.com, secret: openai_key}
    scripted: {api: anthropic, kind: scripted}
agents:
  demo:
    model: {providers: [anthropic, openai, scripted]}
  pinned:
    model: {providers: [openai], allow: [gpt-4o-mini]}
  none: {}
`

// The first provider whose key is there: a real model with a key, the
// scripted one without; asked-for providers and models are honoured or
// refused with the reason.
func TestChoose(t *testing.T) {
	cfg, err := config.Parse(t.TempDir(), "c.yaml", []byte(chooseConfig))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	has := func(_, provider, _ string) bool { return keys[provider] }
	for _, tc := range []struct {
		name, agent, provider, model string
		keys                         []string
		want                         Choice
		err                          string
	}{
		{name: "no key: scripted", agent: "demo", want: Choice{Provider: "scripted", API: model.Anthropic, Model: scripted.Model, Scripted: true}},
		{name: "anthropic key", agent: "demo", keys: []string{"anthropic"}, want: Choice{Provider: "anthropic", API: model.Anthropic, Model: DefaultModels[model.Anthropic]}},
		{name: "openai key", agent: "demo", keys: []string{"openai"}, want: Choice{Provider: "openai", API: model.OpenAI, Model: DefaultModels[model.OpenAI]}},
		{name: "asked model", agent: "demo", keys: []string{"openai"}, model: "gpt-5", want: Choice{Provider: "openai", API: model.OpenAI, Model: "gpt-5"}},
		{name: "allowlist's model", agent: "pinned", keys: []string{"openai"}, want: Choice{Provider: "openai", API: model.OpenAI, Model: "gpt-4o-mini"}},
		{name: "asked provider without key", agent: "demo", provider: "anthropic", err: "no key"},
		{name: "provider not the agent's", agent: "pinned", provider: "scripted", err: "not one of agent"},
		{name: "no providers", agent: "none", err: "has no model providers"},
		{name: "unknown agent", agent: "ghost", err: "not configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(keys)
			for _, k := range tc.keys {
				keys[k] = true
			}
			got, err := Choose(cfg, tc.agent, tc.provider, tc.model, has)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

// Bad starts are refused before anything runs, with the reason.
func TestServerRefusesBadStarts(t *testing.T) {
	cfg, err := config.Parse(t.TempDir(), "c.yaml", []byte(chooseConfig))
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(t.TempDir())
	other := &Session{ID: "0123456789abcdef0123456789abcdef", Agent: "pinned", Provider: "openai", API: model.OpenAI}
	if err := store.Save(other); err != nil {
		t.Fatal(err)
	}
	s := &Server{Store: store, Config: func() *config.Config { return cfg }, HasKey: func(string, string, string) bool { return false }}
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{}`, 400, "give a task"},
		{`{"task":"x","bogus":1}`, 400, "unknown field"},
		{`not json`, 400, "not a session start"},
		{`{"continue":"../../etc/passwd"}`, 404, "not a session id"},
		{`{"continue":"ffffffffffffffffffffffffffffffff"}`, 404, "no such session"},
		{`{"continue":"0123456789abcdef0123456789abcdef"}`, 400, `pinned`},
		{`{"task":"x","provider":"anthropic"}`, 400, "no key"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/agents/demo/sessions", strings.NewReader(tc.body))
		req.SetPathValue("agent", "demo")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want %d %q", tc.body, rec.Code, rec.Body, tc.status, tc.want)
		}
	}
}

// The core tools' schemas reach the model without top-level combinators
// (which both APIs refuse), names a model API takes, and the rest intact.
func TestOfferedSchemas(t *testing.T) {
	var ts toolSet
	ts.byName = map[string]string{}
	ts.add("srv.tool", "d", json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"oneOf":[{"required":["a"]}]}`))
	ts.add("srv_tool", "d", json.RawMessage(`{"type":"object"}`))
	if ts.offers[0].Name != "srv_tool" || ts.offers[1].Name != "srv_tool_2" || ts.byName["srv_tool_2"] != "srv_tool" || ts.byName["srv_tool"] != "srv.tool" {
		t.Fatalf("names: %+v", ts.byName)
	}
	if bytes.Contains(ts.offers[0].Schema, []byte("oneOf")) || !bytes.Contains(ts.offers[0].Schema, []byte(`"properties"`)) {
		t.Fatalf("schema: %s", ts.offers[0].Schema)
	}
}

// Answers that are no answer are errors, never a turn with made-up calls.
func TestReadTurnBadAnswers(t *testing.T) {
	for _, tc := range []struct {
		api         model.API
		ctype, body string
	}{
		{model.Anthropic, "application/json", "\x00\xffnot json"},
		{model.OpenAI, "application/json", `{"choices":[]}`},
		{model.Anthropic, "text/event-stream", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n"},
		{model.OpenAI, "text/event-stream", "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"},
		{model.Anthropic, "text/event-stream", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n"},
	} {
		if _, err := readTurn(tc.api, tc.ctype, strings.NewReader(tc.body), nil); err == nil {
			t.Errorf("%s %s %q: no error", tc.api, tc.ctype, tc.body)
		}
	}
}

func FuzzReadTurn(f *testing.F) {
	f.Add(true, "text/event-stream", "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"exec\"}}\n\n")
	f.Add(false, "application/json", `{"choices":[{"message":{"content":"hi","tool_calls":[{"id":"c","function":{"name":"exec","arguments":"{}"}}]}}]}`)
	f.Fuzz(func(t *testing.T, anthropic bool, ctype, body string) {
		api := model.OpenAI
		if anthropic {
			api = model.Anthropic
		}
		var streamed strings.Builder
		turn, err := readTurn(api, ctype, strings.NewReader(body), func(s string) { streamed.WriteString(s) })
		if err != nil {
			return
		}
		// What streamed to the terminal is what the turn keeps, and
		// everything decoded is text.
		if streamed.String() != turn.Text || !utf8.ValidString(turn.Text) {
			t.Fatalf("streamed %q, kept %q", streamed.String(), turn.Text)
		}
		for _, c := range turn.Calls {
			if !utf8.ValidString(c.ID) || !utf8.ValidString(c.Name) {
				t.Fatalf("call %+v", c)
			}
		}
	})
}
