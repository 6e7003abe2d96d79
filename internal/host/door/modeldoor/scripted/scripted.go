// Package scripted is a model served by toolgate itself, with no network
// and no key: a file of turns, each what the model says and the tool calls
// it makes. It answers in either API's shape (Anthropic Messages, OpenAI
// chat completions), streamed or not, so the quickstart's agent session
// runs anywhere, and tests drive the agent loop over real HTTP with it.
//
// It keeps no state: the turn to answer is the number of model turns in
// the conversation it is sent, so a continued session carries on where it
// stopped.
package scripted

import (
	"bytes"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
)

// Model is the model name the script answers as.
const Model = "scripted"

//go:embed demo.yaml
var demo []byte

// Script is a file of turns.
type Script struct {
	Turns []Turn `yaml:"turns"`
}

// Turn is one answer of the model.
type Turn struct {
	// Expect must occur in the previous turn's tool results, or the script
	// stops there and says what it got.
	Expect string `yaml:"expect"`
	Say    string `yaml:"say"`
	Tools  []Call `yaml:"tools"`
}

// Call is one tool call a turn makes.
type Call struct {
	Name  string         `yaml:"name"`
	Input map[string]any `yaml:"input"`
}

// Default is the quickstart's script, embedded.
func Default() *Script {
	s, err := Parse(demo)
	if err != nil {
		panic("scripted: the embedded script: " + err.Error())
	}
	return s
}

// Load reads a script file; "" is the embedded default.
func Load(path string) (*Script, error) {
	if path == "" {
		return Default(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("scripted model %s: %w", path, err)
	}
	return s, nil
}

// Parse reads a script, strictly.
func Parse(b []byte) (*Script, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if len(s.Turns) == 0 {
		return nil, errors.New("the script has no turns")
	}
	for i, t := range s.Turns {
		if t.Say == "" && len(t.Tools) == 0 {
			return nil, fmt.Errorf("turns[%d]: says nothing and calls nothing", i)
		}
		for j, c := range t.Tools {
			if c.Name == "" {
				return nil, fmt.Errorf("turns[%d].tools[%d]: no name", i, j)
			}
			if _, err := json.Marshal(c.Input); err != nil {
				return nil, fmt.Errorf("turns[%d].tools[%d].input: %v", i, j, err)
			}
		}
	}
	return &s, nil
}

// maxRequest bounds a request the script reads.
const maxRequest = 64 << 20

// ServeHTTP answers POST /v1/messages and /v1/chat/completions.
func (s *Script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var chat bool
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/v1/messages":
	case "/v1/chat/completions":
		chat = true
	default:
		writeError(w, chat, http.StatusNotFound, "the scripted model serves /v1/messages and /v1/chat/completions only")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest))
	if err != nil {
		writeError(w, chat, http.StatusBadRequest, err.Error())
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, chat, http.StatusBadRequest, "the request is not JSON: "+err.Error())
		return
	}
	n, last := req.progress(chat)
	a := s.answer(n, last)
	a.inTokens = int64(len(body)/4 + 1)
	a.chat = chat
	if req.Stream {
		a.stream(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a.whole())
}

// Do serves a request in process: the model door's backend.
func (s *Script) Do(req *http.Request) (*http.Response, error) {
	rec := newRecorder()
	s.ServeHTTP(rec, req)
	return rec.response(req), nil
}

// answer is one answer to give.
type answer struct {
	text      string
	calls     []Call
	chat      bool
	inTokens  int64
	outTokens int64
}

func (s *Script) answer(n int, last string) *answer {
	if n >= len(s.Turns) {
		return &answer{text: "(scripted model) The script has no more turns.", outTokens: 10}
	}
	t := s.Turns[n]
	if t.Expect != "" && !strings.Contains(last, t.Expect) {
		return &answer{text: fmt.Sprintf("(scripted model) The script expected the last tool results to contain %q, and they did not:\n%s\nStopping here.",
			t.Expect, cutText(last, 2000)), outTokens: 20}
	}
	a := &answer{text: t.Say, calls: t.Tools, outTokens: int64(len(t.Say)/4 + 1)}
	for _, c := range t.Tools {
		b, _ := json.Marshal(c.Input)
		a.outTokens += int64(len(b)/4 + 1)
	}
	return a
}

func cutText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// request is what the script reads of a request: the conversation.
type request struct {
	Stream   bool `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// progress counts the model's turns so far and joins the text of the tool
// results after the last of them.
func (r *request) progress(chat bool) (int, string) {
	n, after := 0, -1
	for i, m := range r.Messages {
		if m.Role == "assistant" {
			n, after = n+1, i
		}
	}
	var parts []string
	for _, m := range r.Messages[after+1:] {
		switch {
		case chat && m.Role == "tool":
			var s string
			_ = json.Unmarshal(m.Content, &s)
			parts = append(parts, s)
		case !chat && m.Role == "user":
			var blocks []struct {
				Type    string          `json:"type"`
				Content json.RawMessage `json:"content"`
			}
			_ = json.Unmarshal(m.Content, &blocks)
			for _, b := range blocks {
				if b.Type == "tool_result" {
					parts = append(parts, contentText(b.Content))
				}
			}
		}
	}
	return n, strings.Join(parts, "\n")
}

// contentText is a tool_result's content: a string or text blocks.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct{ Text string }
	_ = json.Unmarshal(raw, &blocks)
	var out []string
	for _, b := range blocks {
		out = append(out, b.Text)
	}
	return strings.Join(out, "\n")
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (a *answer) stopReason() string {
	switch {
	case len(a.calls) > 0 && a.chat:
		return "tool_calls"
	case len(a.calls) > 0:
		return "tool_use"
	case a.chat:
		return "stop"
	}
	return "end_turn"
}

func (a *answer) whole() any {
	if a.chat {
		msg := map[string]any{"role": "assistant", "content": a.text}
		var calls []any
		for _, c := range a.calls {
			in, _ := json.Marshal(c.Input)
			calls = append(calls, map[string]any{"id": newID("call_"), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": string(in)}})
		}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		return map[string]any{"id": newID("chatcmpl-"), "object": "chat.completion", "model": Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": a.stopReason()}},
			"usage":   map[string]any{"prompt_tokens": a.inTokens, "completion_tokens": a.outTokens, "total_tokens": a.inTokens + a.outTokens}}
	}
	var content []any
	if a.text != "" {
		content = append(content, map[string]any{"type": "text", "text": a.text})
	}
	for _, c := range a.calls {
		content = append(content, map[string]any{"type": "tool_use", "id": newID("toolu_"), "name": c.Name, "input": inputOf(c)})
	}
	return map[string]any{"id": newID("msg_"), "type": "message", "role": "assistant", "model": Model,
		"content": content, "stop_reason": a.stopReason(),
		"usage": map[string]any{"input_tokens": a.inTokens, "output_tokens": a.outTokens}}
}

func inputOf(c Call) any {
	if c.Input == nil {
		return map[string]any{}
	}
	return c.Input
}

// stream sends the answer as SSE, the text in a few pieces.
func (a *answer) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	pieces := split(a.text)
	if a.chat {
		id := newID("chatcmpl-")
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": id, "object": "chat.completion.chunk", "model": Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		for _, p := range pieces {
			send("", chunk(map[string]any{"content": p}, nil))
		}
		for i, c := range a.calls {
			in, _ := json.Marshal(inputOf(c))
			send("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": newID("call_"), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
			send("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": string(in)}}}}, nil))
		}
		send("", chunk(map[string]any{}, a.stopReason()))
		send("", map[string]any{"id": id, "object": "chat.completion.chunk", "model": Model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": a.inTokens, "completion_tokens": a.outTokens, "total_tokens": a.inTokens + a.outTokens}})
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": newID("msg_"), "type": "message",
		"role": "assistant", "model": Model, "content": []any{}, "stop_reason": nil,
		"usage": map[string]any{"input_tokens": a.inTokens, "output_tokens": 1}}})
	idx := 0
	if a.text != "" {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, p := range pieces {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": p}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	for _, c := range a.calls {
		in, _ := json.Marshal(inputOf(c))
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": newID("toolu_"), "name": c.Name, "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": a.stopReason()},
		"usage": map[string]any{"output_tokens": a.outTokens}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// split cuts text into pieces of a few words, as a model streams it.
func split(text string) []string {
	var out []string
	words := strings.SplitAfter(text, " ")
	for i := 0; i < len(words); i += 4 {
		out = append(out, strings.Join(words[i:min(i+4, len(words))], ""))
	}
	return out
}

func writeError(w http.ResponseWriter, chat bool, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if chat {
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
}

// recorder keeps an in-process answer: the script writes it whole, at once.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{h: http.Header{}} }

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) response(req *http.Request) *http.Response {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", r.status, http.StatusText(r.status)), StatusCode: r.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: r.h, ContentLength: int64(r.body.Len()),
		Body: io.NopCloser(&r.body), Request: req}
}

// Kind is the provider kind: gateway.models.NAME.kind: scripted.
const Kind = "scripted"

func init() { modeldoor.Register(Kind, newBackend) }

func newBackend(name string, p config.ModelProvider, _ modeldoor.Env) (modeldoor.Backend, error) {
	if p.Script != "" && !filepath.IsAbs(p.Script) {
		return nil, fmt.Errorf("gateway.models.%s.script: %q is not an absolute path", name, p.Script)
	}
	s, err := Load(p.Script)
	if err != nil {
		return nil, fmt.Errorf("gateway.models.%s: %w", name, err)
	}
	return s, nil
}
