// Package fakeprovider is a model API for tests: Anthropic Messages and
// OpenAI chat completions and Responses, streamed or not, answering with a
// tool call or text, and misbehaving on request (429, garbage, a hang, a
// cut stream). It records what it received, headers included, so tests can
// check which key reached it, and what it would bill for each answer: the
// input once it starts answering, and the output it generated — a slow
// stream whose reader goes away stops generating, as a provider does.
package fakeprovider

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Behaviours, chosen by the request's model name.
const (
	ModelToolUse = "fake-tool"    // answer with one tool call (id per API below)
	ModelText    = "fake-text"    // answer with text
	Model429     = "fake-429"     // 429 with Retry-After: 7
	ModelGarbage = "fake-garbage" // 200 with a body that is no answer
	ModelHang    = "fake-hang"    // headers, then nothing until the client goes
	ModelCut     = "fake-cut"     // a stream cut after its first event
	ModelSlow    = "fake-slow"    // a stream of Chunks events, Gap apart; not streamed: the answer after Chunks×Gap
)

// Tool call ids the fake emits.
const (
	AnthropicToolID = "toolu_fake1"
	OpenAIToolID    = "call_fake1"
)

// Usage the fake reports for every answer.
const (
	InputTokens  = 120
	OutputTokens = 30
	CacheRead    = 40
)

// Request is one request the fake received.
type Request struct {
	Method, Path string
	RawQuery     string
	Header       http.Header
	Body         []byte
	// Billed is the tokens the fake would bill for its answer so far;
	// Finished says it sent the whole answer, Over that it stopped
	// answering (finished or not): Billed is final.
	Billed   int64
	Finished bool
	Over     bool
}

// Server is a running fake provider.
type Server struct {
	*httptest.Server
	Chunks   int           // events of a ModelSlow stream; default 50
	PerChunk int64         // output tokens each of them is; default 1
	Gap      time.Duration // between them
	mu       sync.Mutex
	reqs     []Request
}

// New starts a fake provider, closed when t ends.
func New(t testing.TB) *Server {
	s := &Server{Chunks: 50, PerChunk: 1}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Requests returns what the fake received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Billed is the tokens the fake would bill for all its answers so far.
func (s *Server) Billed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.reqs {
		n += r.Billed
	}
	return n
}

// bill adds tokens to request i's bill, or marks it finished.
func (s *Server) bill(i int, tokens int64, finished bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs[i].Billed += tokens
	s.reqs[i].Finished = s.reqs[i].Finished || finished
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := len(s.reqs)
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.reqs[i].Over = true
		s.mu.Unlock()
	}()
	// Keys matched exactly, the last of two equal ones winning, as the
	// providers' own JSON readers do (encoding/json's structs would fold
	// "Model" onto "model").
	var fields map[string]any
	_ = json.Unmarshal(body, &fields)
	var req struct {
		Model  string
		Stream bool
	}
	req.Model, _ = fields["model"].(string)
	req.Stream, _ = fields["stream"].(bool)
	switch req.Model {
	case Model429:
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
		return
	case ModelGarbage:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "\x00\xffnot json at all")
		return
	case ModelHang:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	api := "anthropic"
	switch r.URL.Path {
	case "/v1/messages":
	case "/v1/messages/count_tokens":
		io.WriteString(w, `{"input_tokens":12}`)
		return
	case "/v1/chat/completions":
		api = "chat"
	case "/v1/responses":
		api = "responses"
	default:
		http.Error(w, `{"error":{"message":"no such path"}}`, http.StatusNotFound)
		return
	}
	output := int64(OutputTokens)
	if req.Model == ModelSlow {
		output = int64(s.Chunks) * s.PerChunk
	}
	s.bill(i, InputTokens+CacheRead, false)
	if !req.Stream {
		if req.Model == ModelSlow {
			time.Sleep(time.Duration(s.Chunks) * s.Gap) // generating, reader or not
		}
		s.bill(i, output, false)
		w.Header().Set("Content-Type", "application/json")
		if _, err := io.WriteString(w, whole(api, req.Model, output)); err == nil {
			s.bill(i, 0, true)
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	evs := events(api, req.Model, output)
	if req.Model == ModelSlow {
		// The answer's text as many small deltas, as real streams send it.
		delta := map[string]string{
			"anthropic": "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"FAKE-OK \"}}\n\n",
			"chat":      "data: {\"model\":\"fake-slow\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"FAKE-OK \"},\"finish_reason\":null}]}\n\n",
			"responses": "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"FAKE-OK \"}\n\n",
		}[api]
		tail := evs[2:]
		evs = append([]string{evs[0], evs[1]}, make([]string, 0, s.Chunks)...)
		for range s.Chunks {
			evs = append(evs, delta)
		}
		evs = append(evs, tail...)
	}
	for j, ev := range evs {
		if _, err := io.WriteString(w, ev); err != nil || r.Context().Err() != nil {
			return
		}
		fl.Flush()
		if req.Model == ModelSlow && j >= 2 && j < 2+s.Chunks {
			s.bill(i, s.PerChunk, false)
		}
		if req.Model == ModelCut && j == 0 {
			// Cut the connection mid-stream, with no chunk terminator.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if req.Model == ModelSlow && s.Gap > 0 {
			time.Sleep(s.Gap)
		}
	}
	if req.Model == ModelSlow {
		output = 0 // billed chunk by chunk
	}
	s.bill(i, output, true)
}

func whole(api, model string, output int64) string {
	tool := model == ModelToolUse
	switch api {
	case "anthropic":
		content, stop := `[{"type":"text","text":"FAKE-OK"}]`, "end_turn"
		if tool {
			content, stop = `[{"type":"tool_use","id":"`+AnthropicToolID+`","name":"Bash","input":{"command":"echo hi"}}]`, "tool_use"
		}
		return fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":%s,"stop_reason":%q,"usage":{"input_tokens":%d,"output_tokens":%d,"cache_read_input_tokens":%d}}`,
			model, content, stop, InputTokens, output, CacheRead)
	case "chat":
		msg, stop := `{"role":"assistant","content":"FAKE-OK"}`, "stop"
		if tool {
			msg, stop = `{"role":"assistant","content":null,"tool_calls":[{"id":"`+OpenAIToolID+`","type":"function","function":{"name":"bash","arguments":"{}"}}]}`, "tool_calls"
		}
		return fmt.Sprintf(`{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
			model, msg, stop, InputTokens+CacheRead, output, CacheRead)
	}
	out := `[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"FAKE-OK"}]}]`
	if tool {
		out = `[{"type":"function_call","call_id":"` + OpenAIToolID + `","name":"exec_command","arguments":"{}"}]`
	}
	return fmt.Sprintf(`{"id":"r1","object":"response","model":%q,"status":"completed","output":%s,"usage":{"input_tokens":%d,"output_tokens":%d,"input_tokens_details":{"cached_tokens":%d}}}`,
		model, out, InputTokens+CacheRead, output, CacheRead)
}

// Events is the SSE stream of an answer, one event per element.
func Events(api, model string) []string { return events(api, model, OutputTokens) }

func events(api, model string, output int64) []string {
	tool := model == ModelToolUse
	sse := func(event, data string) string {
		if event == "" {
			return "data: " + data + "\n\n"
		}
		return "event: " + event + "\ndata: " + data + "\n\n"
	}
	switch api {
	case "anthropic":
		block := `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
		delta := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"FAKE-OK "}}`
		stop := "end_turn"
		if tool {
			block = `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"` + AnthropicToolID + `","name":"Bash","input":{}}}`
			delta = `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`
			stop = "tool_use"
		}
		return []string{
			sse("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[],"usage":{"input_tokens":%d,"output_tokens":1,"cache_read_input_tokens":%d}}}`, model, InputTokens, CacheRead)),
			sse("content_block_start", block) + sse("content_block_delta", delta),
			sse("content_block_stop", `{"type":"content_block_stop","index":0}`),
			sse("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q},"usage":{"output_tokens":%d}}`, stop, output)),
			sse("message_stop", `{"type":"message_stop"}`),
		}
	case "chat":
		first := fmt.Sprintf(`{"model":%q,"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, model)
		delta := fmt.Sprintf(`{"model":%q,"choices":[{"index":0,"delta":{"content":"FAKE-OK "}}]}`, model)
		stop := "stop"
		if tool {
			delta = fmt.Sprintf(`{"model":%q,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"%s","type":"function","function":{"name":"bash","arguments":"{}"}}]}}]}`, model, OpenAIToolID)
			stop = "tool_calls"
		}
		return []string{
			sse("", first),
			sse("", delta),
			sse("", fmt.Sprintf(`{"model":%q,"choices":[{"index":0,"delta":{},"finish_reason":%q}]}`, model, stop)),
			sse("", fmt.Sprintf(`{"model":%q,"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`, model, InputTokens+CacheRead, output, CacheRead)),
			sse("", "[DONE]"),
		}
	}
	item := `{"type":"message","role":"assistant","content":[]}`
	if tool {
		item = `{"type":"function_call","call_id":"` + OpenAIToolID + `","name":"exec_command","arguments":"{}"}`
	}
	return []string{
		sse("response.created", fmt.Sprintf(`{"type":"response.created","response":{"model":%q,"status":"in_progress"}}`, model)),
		sse("response.output_text.delta", `{"type":"response.output_text.delta","delta":"FAKE-OK "}`),
		sse("response.output_item.done", `{"type":"response.output_item.done","item":`+item+`}`),
		sse("response.completed", fmt.Sprintf(`{"type":"response.completed","response":{"model":%q,"status":"completed","output":[%s],"usage":{"input_tokens":%d,"output_tokens":%d,"input_tokens_details":{"cached_tokens":%d}}}}`,
			model, item, InputTokens+CacheRead, output, CacheRead)),
	}
}

// Key is the credential a request carried, whichever header held it.
func (r Request) Key() string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}
