package agentloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/internal/host/model"
	"github.com/toolgate/toolgate/internal/lib/sse"
)

// Message is one turn of the conversation, in neither provider's shape:
// the session file keeps it so, and each API's body is built from it.
type Message struct {
	Role    string       `json:"role"` // user or assistant
	Text    string       `json:"text,omitempty"`
	Calls   []ToolCall   `json:"calls,omitempty"`   // assistant: the tools it asked for
	Results []ToolResult `json:"results,omitempty"` // user: what they gave
}

// ToolCall is one tool the model asked for.
type ToolCall struct {
	ID    string          `json:"id"`   // the provider's tool_use / tool call id
	Name  string          `json:"name"` // as offered to the model
	Input json.RawMessage `json:"input"`
}

// ToolResult answers one ToolCall.
type ToolResult struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	IsError bool   `json:"isError,omitempty"`
}

// Offer is one tool as offered to the model.
type Offer struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// Turn is what one model answer said.
type Turn struct {
	Text    string
	Calls   []ToolCall
	Outcome model.Outcome // usage, stop reason (model's own parse of the answer)
}

// requestBody builds the body of one model request in api's shape.
func requestBody(api model.API, modelName string, maxTokens int64, stream bool, system string, offers []Offer, msgs []Message) ([]byte, error) {
	switch api {
	case model.Anthropic:
		return json.Marshal(anthropicBody(modelName, maxTokens, stream, system, offers, msgs))
	case model.OpenAI:
		return json.Marshal(chatBody(modelName, maxTokens, stream, system, offers, msgs))
	}
	return nil, fmt.Errorf("agentloop: no request shape for API %q", api)
}

// apiPath is the endpoint the loop calls for api.
func apiPath(api model.API) string {
	if api == model.Anthropic {
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

func endpoint(api model.API) model.Endpoint {
	if api == model.Anthropic {
		return model.Messages
	}
	return model.ChatCompletions
}

type obj = map[string]any

func anthropicBody(modelName string, maxTokens int64, stream bool, system string, offers []Offer, msgs []Message) obj {
	var tools []obj
	for _, o := range offers {
		tools = append(tools, obj{"name": o.Name, "description": o.Description, "input_schema": o.Schema})
	}
	var out []obj
	for _, m := range msgs {
		var content []obj
		for _, r := range m.Results {
			content = append(content, obj{"type": "tool_result", "tool_use_id": r.ID, "content": r.Content, "is_error": r.IsError})
		}
		if m.Text != "" {
			content = append(content, obj{"type": "text", "text": m.Text})
		}
		for _, c := range m.Calls {
			content = append(content, obj{"type": "tool_use", "id": c.ID, "name": c.Name, "input": rawOrEmpty(c.Input)})
		}
		out = append(out, obj{"role": m.Role, "content": content})
	}
	b := obj{"model": modelName, "max_tokens": maxTokens, "messages": out, "stream": stream}
	if system != "" {
		b["system"] = system
	}
	if len(tools) > 0 {
		b["tools"] = tools
	}
	return b
}

func chatBody(modelName string, maxTokens int64, stream bool, system string, offers []Offer, msgs []Message) obj {
	var tools []obj
	for _, o := range offers {
		tools = append(tools, obj{"type": "function", "function": obj{"name": o.Name, "description": o.Description, "parameters": o.Schema}})
	}
	var out []obj
	if system != "" {
		out = append(out, obj{"role": "system", "content": system})
	}
	for _, m := range msgs {
		for _, r := range m.Results {
			content := r.Content
			if r.IsError {
				content = "error: " + content // chat completions has no error flag
			}
			out = append(out, obj{"role": "tool", "tool_call_id": r.ID, "content": content})
		}
		if m.Role == "user" && m.Text != "" {
			out = append(out, obj{"role": "user", "content": m.Text})
		}
		if m.Role == "assistant" {
			a := obj{"role": "assistant", "content": m.Text}
			var calls []obj
			for _, c := range m.Calls {
				calls = append(calls, obj{"id": c.ID, "type": "function", "function": obj{"name": c.Name, "arguments": string(rawOrEmpty(c.Input))}})
			}
			if len(calls) > 0 {
				a["tool_calls"] = calls
			}
			out = append(out, a)
		}
	}
	b := obj{"model": modelName, "max_tokens": maxTokens, "messages": out, "stream": stream}
	if len(tools) > 0 {
		b["tools"] = tools
	}
	return b
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(r)) == 0 {
		return json.RawMessage("{}")
	}
	return r
}

// maxAnswer bounds an answer the loop reads (a streamed one is read event
// by event and bounded the same).
const maxAnswer = 32 << 20

// maxEventLine bounds one line of a streamed answer: a data line holds
// one delta, far smaller.
const maxEventLine = 8 << 20

// readTurn reads one answer, JSON or SSE, into a Turn; text deltas go to
// onText as they arrive. The usage and stop reason come from the model
// package's parsers, which the door uses too.
func readTurn(api model.API, contentType string, body io.Reader, onText func(string)) (Turn, error) {
	ep := endpoint(api)
	body = io.LimitReader(body, maxAnswer)
	if !strings.HasPrefix(strings.ToLower(contentType), "text/event-stream") {
		b, err := io.ReadAll(body)
		if err != nil {
			return Turn{}, fmt.Errorf("reading the answer: %w", err)
		}
		t, err := parseWhole(api, b)
		if err != nil {
			return Turn{}, err
		}
		t.Outcome, _ = model.ParseResponse(ep, b)
		if t.Text != "" && onText != nil {
			onText(t.Text)
		}
		return t, nil
	}
	st := model.NewStream(ep)
	acc := newAccumulator(api, onText)
	// One parse of the stream: each event goes to the facts and the text.
	if err := sse.Read(body, maxEventLine, func(event string, data []byte) {
		st.Event(event, data)
		acc.event(event, data)
	}); err != nil {
		return Turn{}, fmt.Errorf("reading the answer's stream: %w", err)
	}
	t := acc.turn()
	t.Outcome = st.Outcome()
	if t.Outcome.Error != "" {
		return t, fmt.Errorf("the provider reported an error: %s", t.Outcome.Error)
	}
	if !st.Done() {
		return t, errors.New("the answer's stream ended before its final event")
	}
	return t, nil
}

func parseWhole(api model.API, b []byte) (Turn, error) {
	var t Turn
	switch api {
	case model.Anthropic:
		var m struct {
			Content []struct {
				Type  string          `json:"type"`
				Text  string          `json:"text"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return t, fmt.Errorf("the answer is not a Messages response: %w", err)
		}
		for _, c := range m.Content {
			switch c.Type {
			case "text":
				t.Text += c.Text
			case "tool_use":
				t.Calls = append(t.Calls, ToolCall{ID: c.ID, Name: c.Name, Input: c.Input})
			}
		}
	default:
		var m struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return t, fmt.Errorf("the answer is not a chat completion: %w", err)
		}
		if len(m.Choices) == 0 {
			return t, errors.New("the answer has no choices")
		}
		msg := m.Choices[0].Message
		if msg.Content != nil {
			t.Text = *msg.Content
		}
		for _, c := range msg.ToolCalls {
			t.Calls = append(t.Calls, ToolCall{ID: c.ID, Name: c.Function.Name, Input: json.RawMessage(c.Function.Arguments)})
		}
	}
	return t, nil
}

// accumulator assembles a streamed answer's text and tool calls.
type accumulator struct {
	api    model.API
	onText func(string)
	text   strings.Builder
	calls  map[int]*partialCall
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func newAccumulator(api model.API, onText func(string)) *accumulator {
	return &accumulator{api: api, onText: onText, calls: map[int]*partialCall{}}
}

func (a *accumulator) call(i int) *partialCall {
	if a.calls[i] == nil {
		a.calls[i] = &partialCall{}
	}
	return a.calls[i]
}

func (a *accumulator) addText(s string) {
	if s == "" {
		return
	}
	a.text.WriteString(s)
	if a.onText != nil {
		a.onText(s)
	}
}

func (a *accumulator) event(event string, data []byte) {
	if a.api == model.Anthropic {
		var e struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock struct {
				Type string `json:"type"`
				ID   string `json:"id"`
				Name string `json:"name"`
				Text string `json:"text"`
			} `json:"content_block"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		switch e.Type {
		case "content_block_start":
			if e.ContentBlock.Type == "tool_use" {
				c := a.call(e.Index)
				c.id, c.name = e.ContentBlock.ID, e.ContentBlock.Name
			}
			a.addText(e.ContentBlock.Text)
		case "content_block_delta":
			switch e.Delta.Type {
			case "text_delta":
				a.addText(e.Delta.Text)
			case "input_json_delta":
				a.call(e.Index).args.WriteString(e.Delta.PartialJSON)
			}
		}
		return
	}
	if string(data) == "[DONE]" {
		return
	}
	var c struct {
		Choices []struct {
			Delta struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &c) != nil || len(c.Choices) == 0 {
		return
	}
	d := c.Choices[0].Delta
	a.addText(d.Content)
	for _, tc := range d.ToolCalls {
		p := a.call(tc.Index)
		if tc.ID != "" {
			p.id = tc.ID
		}
		if tc.Function.Name != "" {
			p.name = tc.Function.Name
		}
		p.args.WriteString(tc.Function.Arguments)
	}
}

func (a *accumulator) turn() Turn {
	t := Turn{Text: a.text.String()}
	idx := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		c := a.calls[i]
		t.Calls = append(t.Calls, ToolCall{ID: c.id, Name: c.name, Input: json.RawMessage(c.args.String())})
	}
	return t
}
