package model

import (
	"encoding/json"
	"unicode/utf8"
)

// maxToolUseIDs bounds the ids one response records; maxIDLen each one.
const (
	maxToolUseIDs = 256
	maxIDLen      = 256
)

// Usage is the tokens one response reports. Input excludes cached input:
// CacheRead and CacheWrite are counted (and priced) apart.
type Usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead,omitempty"`
	CacheWrite int64 `json:"cacheWrite,omitempty"`
}

// Total is every token the response consumed.
func (u Usage) Total() int64 { return u.Input + u.Output + u.CacheRead + u.CacheWrite }

// Outcome is what a response says about itself.
type Outcome struct {
	Model      string   `json:"model,omitempty"`
	Usage      Usage    `json:"usage"`
	HasUsage   bool     `json:"-"` // the response reported usage at all
	StopReason string   `json:"stopReason,omitempty"`
	ToolUseIDs []string `json:"toolUseIds,omitempty"`
	// Error is an error the provider reported in a 200 answer or in a
	// stream (an SSE error event).
	Error string `json:"error,omitempty"`
}

func (o *Outcome) addToolUse(id string) {
	if id == "" || len(o.ToolUseIDs) >= maxToolUseIDs || len(id) > maxIDLen || !utf8.ValidString(id) {
		return
	}
	for _, have := range o.ToolUseIDs {
		if have == id {
			return
		}
	}
	o.ToolUseIDs = append(o.ToolUseIDs, id)
}

func (o *Outcome) setModel(m string) {
	if m != "" && len(m) <= maxModelLen && utf8.ValidString(m) {
		o.Model = m
	}
}

func (o *Outcome) setStop(s string) {
	if s != "" && len(s) <= maxModelLen && utf8.ValidString(s) {
		o.StopReason = s
	}
}

func (o *Outcome) setError(s string) {
	if len(s) > 512 {
		s = s[:512]
	}
	if !utf8.ValidString(s) {
		s = "(not UTF-8)"
	}
	o.Error = s
}

// Wire shapes of the parts of responses the door reads.
type (
	anthropicUsage struct {
		Input      *int64 `json:"input_tokens"`
		Output     *int64 `json:"output_tokens"`
		CacheWrite *int64 `json:"cache_creation_input_tokens"`
		CacheRead  *int64 `json:"cache_read_input_tokens"`
	}
	anthropicMessage struct {
		Model      string          `json:"model"`
		StopReason string          `json:"stop_reason"`
		Usage      *anthropicUsage `json:"usage"`
		Content    []struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"content"`
	}
	providerError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	openaiUsage struct {
		// chat completions
		Prompt        *int64 `json:"prompt_tokens"`
		Completion    *int64 `json:"completion_tokens"`
		PromptDetails *struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		// Responses
		Input        *int64 `json:"input_tokens"`
		Output       *int64 `json:"output_tokens"`
		InputDetails *struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	chatCompletion struct {
		Model   string       `json:"model"`
		Usage   *openaiUsage `json:"usage"`
		Choices []struct {
			FinishReason *string  `json:"finish_reason"`
			Message      *chatMsg `json:"message"`
			Delta        *chatMsg `json:"delta"`
		} `json:"choices"`
		Error *providerError `json:"error"`
	}
	chatMsg struct {
		ToolCalls []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	}
	response struct {
		Model             string       `json:"model"`
		Status            string       `json:"status"`
		Usage             *openaiUsage `json:"usage"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Output []responseItem `json:"output"`
		Error  *providerError `json:"error"`
	}
	responseItem struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
	}
)

func nz(p *int64) int64 {
	if p == nil || *p < 0 {
		return 0
	}
	return *p
}

// apply adds an Anthropic usage object: message_start carries input and
// cache counts, message_delta the running output count (cumulative).
func (o *Outcome) applyAnthropic(u *anthropicUsage) {
	if u == nil {
		return
	}
	o.HasUsage = true
	if u.Input != nil {
		o.Usage.Input = nz(u.Input)
	}
	if u.Output != nil {
		o.Usage.Output = nz(u.Output)
	}
	if u.CacheWrite != nil {
		o.Usage.CacheWrite = nz(u.CacheWrite)
	}
	if u.CacheRead != nil {
		o.Usage.CacheRead = nz(u.CacheRead)
	}
}

// applyOpenAI reads either usage shape; cached prompt tokens are part of
// the prompt count there and are moved to CacheRead.
func (o *Outcome) applyOpenAI(u *openaiUsage) {
	if u == nil {
		return
	}
	o.HasUsage = true
	in, out := nz(u.Prompt), nz(u.Completion)
	var cached int64
	if u.PromptDetails != nil {
		cached = u.PromptDetails.Cached
	}
	if u.Input != nil || u.Output != nil {
		in, out = nz(u.Input), nz(u.Output)
		if u.InputDetails != nil {
			cached = u.InputDetails.Cached
		}
	}
	cached = min(max(cached, 0), in)
	o.Usage = Usage{Input: in - cached, Output: out, CacheRead: cached}
}

func (o *Outcome) applyMessage(m *anthropicMessage) {
	o.setModel(m.Model)
	o.setStop(m.StopReason)
	o.applyAnthropic(m.Usage)
	for _, c := range m.Content {
		if c.Type == "tool_use" || c.Type == "server_tool_use" {
			o.addToolUse(c.ID)
		}
	}
}

func (o *Outcome) applyChat(c *chatCompletion) {
	o.setModel(c.Model)
	o.applyOpenAI(c.Usage)
	for _, ch := range c.Choices {
		if ch.FinishReason != nil {
			o.setStop(*ch.FinishReason)
		}
		for _, m := range []*chatMsg{ch.Message, ch.Delta} {
			if m == nil {
				continue
			}
			for _, tc := range m.ToolCalls {
				o.addToolUse(tc.ID)
			}
		}
	}
	if c.Error != nil {
		o.setError(c.Error.Message)
	}
}

func (o *Outcome) applyResponse(r *response) {
	o.setModel(r.Model)
	o.setStop(r.Status)
	if r.IncompleteDetails != nil && r.IncompleteDetails.Reason != "" {
		o.setStop(r.IncompleteDetails.Reason)
	}
	o.applyOpenAI(r.Usage)
	for _, it := range r.Output {
		o.applyItem(&it)
	}
	if r.Error != nil {
		o.setError(r.Error.Message)
	}
}

func (o *Outcome) applyItem(it *responseItem) {
	if it.Type == "function_call" || it.Type == "custom_tool_call" {
		o.addToolUse(it.CallID)
	}
}

// ParseResponse reads a whole (not streamed) JSON answer of endpoint e.
// ok is false when the body is not the answer e returns: the caller
// records that usage is unknown.
func ParseResponse(e Endpoint, body []byte) (o Outcome, ok bool) {
	switch e {
	case Messages:
		var m anthropicMessage
		if json.Unmarshal(body, &m) != nil {
			return o, false
		}
		o.applyMessage(&m)
	case CountTokens:
		var c struct {
			Input *int64 `json:"input_tokens"`
		}
		if json.Unmarshal(body, &c) != nil || c.Input == nil {
			return o, false
		}
		// A count consumes nothing: recorded as usage-free.
	case ChatCompletions:
		var c chatCompletion
		if json.Unmarshal(body, &c) != nil {
			return o, false
		}
		o.applyChat(&c)
	case Responses:
		var r response
		if json.Unmarshal(body, &r) != nil {
			return o, false
		}
		o.applyResponse(&r)
	default:
		return o, false
	}
	return o, true
}
