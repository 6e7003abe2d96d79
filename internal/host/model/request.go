package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// ServerTools are what the provider would run itself on the agent's
	// behalf, reaching the network from its side (see ServerTool).
	ServerTools []ServerTool `json:"server_tools,omitempty"`
}

// ErrBadRequest wraps every reason a request body is refused.
var ErrBadRequest = errors.New("bad model request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// The body's members the door reads, by endpoint; a key folding onto one of
// these is refused (see object).
var (
	commonKeys = []string{"model", "max_tokens", "max_completion_tokens", "max_output_tokens", "stream", "tools"}
	topKeys    = map[Endpoint][]string{
		Messages:        append(slices.Clone(commonKeys), "mcp_servers"),
		CountTokens:     append(slices.Clone(commonKeys), "mcp_servers"),
		ChatCompletions: append(slices.Clone(commonKeys), "stream_options", "web_search_options"),
		Responses:       append(slices.Clone(commonKeys), "prompt"),
	}
)

// ParseRequest reads the facts of a request body for endpoint e, keys
// matched exactly as the provider matches them. The body must be one UTF-8
// JSON object with a model; a malformed or ambiguous one is refused here,
// not passed on for the provider to read differently.
func ParseRequest(e Endpoint, body []byte) (Facts, error) {
	var f Facts
	if !utf8.Valid(body) {
		return f, badRequest("the body is not UTF-8")
	}
	if !json.Valid(body) {
		var v struct{}
		return f, badRequest("the body is not valid JSON: %v", jsonReason(json.Unmarshal(body, &v), len(body)))
	}
	top, err := readObject(body, "the body", topKeys[e]...)
	if err != nil {
		return f, err
	}
	if f.Model, err = top.text("model", maxModelLen); err != nil {
		return f, err
	}
	if f.Model == "" {
		return f, badRequest("the request names no model")
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		var n int64
		set, err := top.decode(k, &n)
		if err != nil {
			return f, err
		}
		if set && n < 0 {
			return f, badRequest("a negative token limit")
		}
		f.MaxTokens = max(f.MaxTokens, n)
		if k == "max_tokens" && !set && e == Messages {
			return f, badRequest("an Anthropic Messages request needs max_tokens")
		}
	}
	if _, err := top.decode("stream", &f.Stream); err != nil {
		return f, err
	}
	if err := f.readTools(e, top); err != nil {
		return f, err
	}
	if err := f.readMCPServers(top); err != nil {
		return f, err
	}
	return f, f.readHostedOptions(e, top)
}

// jsonReason keeps a JSON error about a body of n bytes to its kind and
// offset: the encoding/json message may quote the input, which the audit
// log must not hold.
func jsonReason(err error, n int) string {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se) && se.Offset >= int64(n):
		return "it ends early"
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	return "unreadable"
}

// WithStreamUsage makes a streamed OpenAI chat completion report its usage
// (stream_options.include_usage): without it the stream carries no token
// counts and budgets could not be kept. The answer gains one final chunk
// with empty choices, which OpenAI clients expect. The body is edited in
// place, not re-encoded: every other byte reaches the provider as sent.
func WithStreamUsage(e Endpoint, body []byte, f Facts) ([]byte, error) {
	if e != ChatCompletions || !f.Stream {
		return body, nil
	}
	top, err := readObject(body, "the body", topKeys[e]...)
	if err != nil {
		return nil, err
	}
	raw, ok := top.values["stream_options"]
	switch {
	case !ok:
		return insertMember(body, body, `"stream_options":{"include_usage":true}`), nil
	case string(raw) == "null":
		return splice(body, raw, `{"include_usage":true}`), nil
	}
	opts, err := readObject(raw, "the body.stream_options", "include_usage")
	if err != nil {
		return nil, err
	}
	iu, ok := opts.values["include_usage"]
	switch {
	case !ok:
		return insertMember(body, raw, `"include_usage":true`), nil
	case string(iu) != "true":
		return splice(body, iu, "true"), nil
	}
	return body, nil
}

// splice returns body with the value old (a subslice of body) replaced.
func splice(body, old []byte, with string) []byte {
	at := cap(body) - cap(old) // old's offset in body: they share one array
	out := make([]byte, 0, len(body)-len(old)+len(with))
	out = append(out, body[:at]...)
	out = append(out, with...)
	return append(out, body[at+len(old):]...)
}

// insertMember returns body with member added first to the object obj (a
// subslice of body).
func insertMember(body, obj []byte, member string) []byte {
	open := skipSpace(obj, 0)
	if obj[skipSpace(obj, open+1)] != '}' {
		member += ","
	}
	return splice(body, obj[open+1:open+1], member)
}
