// Package wire writes the framing shared by toolgate's HTTP APIs: JSON
// errors with a stable code, and NDJSON frames for output that streams while
// a call runs. The shapes are the protocol leaf's (api.Error, api.Frame).
package wire

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// FrameWriter writes frames to a streaming HTTP response, flushing each so
// output reaches the caller as it is produced. Safe for concurrent use.
type FrameWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
	fl  http.Flusher
	err error
}

// NewFrameWriter starts a streamed 200 response.
func NewFrameWriter(w http.ResponseWriter) *FrameWriter {
	w.Header().Set("Content-Type", api.MediaNDJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return &FrameWriter{enc: json.NewEncoder(w), fl: fl}
}

// Write sends one frame.
func (f *FrameWriter) Write(fr *api.Frame) error { return f.write(fr, true) }

// writeLast writes the response's last frame without flushing it: the
// handler's return sends it with the response's end in one write, and a
// response that streamed nothing before it goes with a Content-Length.
func (f *FrameWriter) writeLast(fr *api.Frame) error { return f.write(fr, false) }

func (f *FrameWriter) write(fr *api.Frame, flush bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.err = f.enc.Encode(fr); f.err == nil && flush && f.fl != nil {
		f.fl.Flush()
	}
	return f.err
}

// Lazy is a call's streamed response that starts (200, NDJSON) at the
// call's first output, so a call refused before it runs still answers with
// its error status. Every entry point that streams a call uses it.
type Lazy struct {
	w      http.ResponseWriter
	call   *gateway.Call
	onFail func(error) // a frame could not be written: the client is gone
	mu     sync.Mutex
	fw     *FrameWriter
}

// NewLazy prepares the response of call. onFail, when set, is told when a
// frame cannot be written (e.g. to cancel the call).
func NewLazy(w http.ResponseWriter, call *gateway.Call, onFail func(error)) *Lazy {
	return &Lazy{w: w, call: call, onFail: onFail}
}

// Streams are the call's stdout and stderr, each write one frame.
func (l *Lazy) Streams(stdin io.Reader) *gateway.Streams {
	return &gateway.Streams{Stdin: stdin, Stdout: lazyStream{l, false}, Stderr: lazyStream{l, true}}
}

// Finish ends the response with the call's outcome: an error status when
// the call was refused before any output, else an error or a result frame.
// The handler returns right after it: that sends the last frame.
func (l *Lazy) Finish(res *gateway.Result, err error) {
	if err != nil && !l.started() {
		var denied *gateway.DeniedError
		if errors.As(err, &denied) || errors.Is(err, gateway.ErrAuditUnavailable) {
			status, e := ErrorFor(err)
			WriteError(l.w, status, e)
			return
		}
	}
	f := l.start()
	if err != nil {
		_, e := ErrorFor(err)
		e.ID = l.call.ID
		_ = f.writeLast(&api.Frame{Error: e})
		return
	}
	if res == nil {
		res = &gateway.Result{}
	}
	_ = f.writeLast(&api.Frame{Result: res})
}

func (l *Lazy) start() *FrameWriter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fw == nil {
		l.w.Header().Set("Toolgate-Call-Id", l.call.ID)
		l.fw = NewFrameWriter(l.w)
	}
	return l.fw
}

func (l *Lazy) started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fw != nil
}

type lazyStream struct {
	l      *Lazy
	stderr bool
}

func (s lazyStream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b := append([]byte(nil), p...) // the caller may reuse p
	fr := &api.Frame{Stdout: b}
	if s.stderr {
		fr = &api.Frame{Stderr: b}
	}
	if err := s.l.start().Write(fr); err != nil {
		if s.l.onFail != nil {
			s.l.onFail(err)
		}
		return 0, err
	}
	return len(p), nil
}

// WriteError sends err as a JSON error body with its HTTP status.
func WriteError(w http.ResponseWriter, status int, e *api.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error *api.Error `json:"error"`
	}{e})
}

// WriteJSON sends v as a 200 JSON body.
func WriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Refused answers a request the gateway refused; err is what
// gateway.Refuse returned. A recorded refusal gets status and code with the
// decision's rule, reason and audit id; one the audit could not record gets
// 503 unavailable, like any call the audit could not take.
//
//	wire.Refused(w, http.StatusForbidden, "denied", gw.Refuse(agent, call, dec))
func Refused(w http.ResponseWriter, status int, code string, err error) {
	var denied *gateway.DeniedError
	if !errors.As(err, &denied) {
		status, e := ErrorFor(err)
		WriteError(w, status, e)
		return
	}
	d := denied.Decision
	WriteError(w, status, &api.Error{Code: code, Rule: d.Rule, Message: d.Reason, ID: denied.ID})
}

// ErrorFor maps a pipeline error to its wire error and HTTP status.
func ErrorFor(err error) (int, *api.Error) {
	var denied *gateway.DeniedError
	var we *api.Error
	switch {
	case errors.As(err, &we):
		return http.StatusBadGateway, we
	case errors.As(err, &denied):
		d := denied.Decision
		e := &api.Error{Code: "denied", Message: d.Reason, Rule: d.Rule, ID: denied.ID}
		switch d.Rule {
		case "agent.unknown", "tool.unknown":
			e.Code = "not_found"
			return http.StatusNotFound, e
		case "args.invalid":
			e.Code = "bad_request"
			return http.StatusBadRequest, e
		}
		return http.StatusForbidden, e
	case errors.Is(err, gateway.ErrAuditUnavailable):
		return http.StatusServiceUnavailable, &api.Error{Code: "unavailable", Message: err.Error()}
	case errors.Is(err, gateway.ErrSandboxUnavailable):
		return http.StatusServiceUnavailable, &api.Error{Code: "sandbox_unavailable", Message: err.Error()}
	}
	return http.StatusUnprocessableEntity, &api.Error{Code: "tool_error", Message: err.Error()}
}
