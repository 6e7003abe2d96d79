package model

import (
	"bytes"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/lib/sse"
)

// maxEventBytes bounds one SSE event the stream parses. A longer one is
// still passed on to the client; only its facts are not read (the usage
// events it needs are small).
const maxEventBytes = 1 << 20

// Stream reads the facts of a streamed (SSE) answer as its bytes pass:
// Write never fails and never holds the stream back, so the door tees the
// upstream's bytes into it on their way to the client.
type Stream struct {
	ep   Endpoint
	out  Outcome
	sse  *sse.Parser
	done bool // the answer said it ended ([DONE], message_stop, response.completed)
}

// NewStream starts reading a streamed answer of endpoint e.
func NewStream(e Endpoint) *Stream {
	s := &Stream{ep: e}
	s.sse = sse.NewParser(maxEventBytes, s.Event)
	return s
}

// Write consumes the next bytes of the stream.
func (s *Stream) Write(p []byte) (int, error) { return s.sse.Write(p) }

// Close ends the stream: an event not closed by a blank line is read too.
func (s *Stream) Close() error { return s.sse.Close() }

// Event reads one event of the stream, for a reader that parses the SSE
// itself (the agent loop, which reads the same events for their text).
func (s *Stream) Event(event string, data []byte) {
	if bytes.Equal(data, []byte("[DONE]")) {
		s.done = true
		return
	}
	if event == "" && s.ep != ChatCompletions {
		var probe struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(data, &probe) != nil {
			return
		}
		event = probe.Type
	}
	switch s.ep {
	case Messages:
		s.anthropicEvent(event, data)
	case ChatCompletions:
		// Most chunks are text deltas that say nothing the door records:
		// only those that may are decoded.
		if s.out.Model != "" && !bytes.Contains(data, []byte(`"tool_calls"`)) && !bytes.Contains(data, []byte(`"usage"`)) &&
			!bytes.Contains(data, []byte(`"finish_reason":"`)) && !bytes.Contains(data, []byte(`"error"`)) {
			return
		}
		var c chatCompletion
		if json.Unmarshal(data, &c) == nil {
			s.out.applyChat(&c)
		}
	case Responses:
		s.responsesEvent(event, data)
	}
}

func (s *Stream) anthropicEvent(event string, data []byte) {
	o := &s.out
	switch event {
	case "message_start":
		var ev struct {
			Message anthropicMessage `json:"message"`
		}
		if json.Unmarshal(data, &ev) == nil {
			o.applyMessage(&ev.Message)
		}
	case "content_block_start":
		var ev struct {
			Block struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			} `json:"content_block"`
		}
		if json.Unmarshal(data, &ev) == nil && (ev.Block.Type == "tool_use" || ev.Block.Type == "server_tool_use") {
			o.addToolUse(ev.Block.ID)
		}
	case "message_delta":
		var ev struct {
			Delta struct {
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
			Usage *anthropicUsage `json:"usage"`
		}
		if json.Unmarshal(data, &ev) == nil {
			o.setStop(ev.Delta.StopReason)
			o.applyAnthropic(ev.Usage)
		}
	case "message_stop":
		s.done = true
	case "error":
		var ev struct {
			Error providerError `json:"error"`
		}
		if json.Unmarshal(data, &ev) == nil {
			o.setError(ev.Error.Type + ": " + ev.Error.Message)
		}
	}
}

func (s *Stream) responsesEvent(event string, data []byte) {
	o := &s.out
	switch event {
	case "response.created", "response.in_progress":
		var ev struct {
			Response response `json:"response"`
		}
		if json.Unmarshal(data, &ev) == nil {
			o.setModel(ev.Response.Model)
		}
	case "response.output_item.added", "response.output_item.done":
		var ev struct {
			Item responseItem `json:"item"`
		}
		if json.Unmarshal(data, &ev) == nil {
			o.applyItem(&ev.Item)
		}
	case "response.completed", "response.incomplete", "response.failed":
		var ev struct {
			Response response `json:"response"`
		}
		if json.Unmarshal(data, &ev) == nil {
			o.applyResponse(&ev.Response)
		}
		s.done = true
	case "error":
		var ev struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &ev) == nil {
			o.setError(ev.Code + ": " + ev.Message)
		}
	}
}

// Outcome is what the stream said so far.
func (s *Stream) Outcome() Outcome { return s.out }

// Done reports whether the stream announced its own end, so a stream that
// stops before it is known to be cut.
func (s *Stream) Done() bool { return s.done }
