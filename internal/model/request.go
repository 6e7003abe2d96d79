package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Bounds on what a request may declare, far above any real one: facts are
// recorded in the audit log and seen by policy.
const (
	maxModelLen = 256
	maxTools    = 512
	maxToolName = 256
)

// Facts are what policy sees of a model request.
type Facts struct {
	Model     string   `json:"model"`
	MaxTokens int64    `json:"max_tokens,omitempty"`
	Stream    bool     `json:"stream,omitempty"`
	Tools     []string `json:"tools,omitempty"` // names of the tools offered, in order
}

// ErrBadRequest wraps every reason a request body is refused.
var ErrBadRequest = errors.New("bad model request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// requestBody holds the fields of every API's request the door reads; the
// rest of the body is forwarded as sent.
type requestBody struct {
	Model               *string         `json:"model"`
	MaxTokens           *int64          `json:"max_tokens"`            // Anthropic, OpenAI chat (legacy)
	MaxCompletionTokens *int64          `json:"max_completion_tokens"` // OpenAI chat
	MaxOutputTokens     *int64          `json:"max_output_tokens"`     // OpenAI Responses
	Stream              *bool           `json:"stream"`
	Tools               json.RawMessage `json:"tools"`
}

type toolEntry struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Function *struct {
		Name string `json:"name"`
	} `json:"function"`
}

// ParseRequest reads the facts of a request body for endpoint e. The body
// must be one JSON object with a model; a malformed one is refused here,
// not passed on for the provider to interpret differently.
func ParseRequest(e Endpoint, body []byte) (Facts, error) {
	var f Facts
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return f, badRequest("the body is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var r requestBody
	if err := dec.Decode(&r); err != nil {
		return f, badRequest("the body is not valid JSON: %v", jsonReason(err))
	}
	if dec.More() || dec.InputOffset() != int64(len(body)) {
		return f, badRequest("the body holds more than one JSON value")
	}
	if err := uniqueKeys(body); err != nil {
		return f, err
	}
	if r.Model == nil || *r.Model == "" {
		return f, badRequest("the request names no model")
	}
	if len(*r.Model) > maxModelLen || !utf8.ValidString(*r.Model) {
		return f, badRequest("the model name is not a short UTF-8 string")
	}
	f.Model = *r.Model
	for _, n := range []*int64{r.MaxTokens, r.MaxCompletionTokens, r.MaxOutputTokens} {
		if n != nil {
			if *n < 0 {
				return f, badRequest("a negative token limit")
			}
			f.MaxTokens = max(f.MaxTokens, *n)
		}
	}
	if e == Messages && r.MaxTokens == nil {
		return f, badRequest("an Anthropic Messages request needs max_tokens")
	}
	f.Stream = r.Stream != nil && *r.Stream
	if len(r.Tools) > 0 && string(r.Tools) != "null" {
		var tools []toolEntry
		if err := json.Unmarshal(r.Tools, &tools); err != nil {
			return f, badRequest("tools is not a list of tool objects: %v", jsonReason(err))
		}
		if len(tools) > maxTools {
			return f, badRequest("more than %d tools offered", maxTools)
		}
		for _, t := range tools {
			name := t.Name
			if t.Function != nil && t.Function.Name != "" {
				name = t.Function.Name // OpenAI chat: {"type":"function","function":{"name":…}}
			}
			if name == "" {
				name = t.Type // a hosted tool: {"type":"web_search"}
			}
			if name == "" || len(name) > maxToolName || !utf8.ValidString(name) {
				return f, badRequest("a tool without a short UTF-8 name")
			}
			f.Tools = append(f.Tools, name)
		}
	}
	return f, nil
}

// uniqueKeys refuses a body whose top-level object names a key twice:
// decoders disagree on which one wins, so policy could see one model while
// the provider serves another.
func uniqueKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the opening brace, checked by the caller
		return badRequest("the body is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return badRequest("the body is not valid JSON: %v", jsonReason(err))
		}
		key, _ := tok.(string)
		if seen[key] {
			return badRequest("the body names the field %q twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return badRequest("the body is not valid JSON: %v", jsonReason(err))
		}
	}
	return nil
}

// jsonReason keeps a JSON error to its kind and offset: the encoding/json
// message may quote the input, which the audit log must not hold.
func jsonReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "it ends early"
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	}
	return "unreadable"
}

// WithStreamUsage makes a streamed OpenAI chat completion report its usage
// (stream_options.include_usage): without it the stream carries no token
// counts and budgets could not be kept. The answer gains one final chunk
// with empty choices, which OpenAI clients expect.
func WithStreamUsage(e Endpoint, body []byte, f Facts) ([]byte, error) {
	if e != ChatCompletions || !f.Stream {
		return body, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, badRequest("the body is not a JSON object")
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := m["stream_options"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, badRequest("stream_options is not an object")
		}
		if string(opts["include_usage"]) == "true" {
			return body, nil
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	m["stream_options"], _ = json.Marshal(opts)
	return json.Marshal(m)
}
