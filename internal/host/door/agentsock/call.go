package agentsock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// Rules of the socket's refusals of a request it could not read as a call.
const (
	RuleMalformed = "request.malformed" // no usable call header
	RuleTooLarge  = "request.too_large" // a call header over MaxHeader
)

// withDetail sets d[k] = v, making d when it is nil.
func withDetail(d map[string]any, k string, v any) map[string]any {
	if d == nil {
		d = map[string]any{}
	}
	d[k] = v
	return d
}

// bodyEndWait bounds how long a finished call waits for a client that sent
// its eof frame to end the request body.
const bodyEndWait = 5 * time.Second

// bodyReaders keep the 64 KiB readers of streamed calls' bodies (a
// launcher streams its stdin when it is a pipe): one made per call was
// most of the gateway's garbage under plugin calls, a GC every ~50 calls.
var bodyReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// call serves POST /v1/tools/{name}/call: header → gateway.Handle → frames.
func (s *Server) call(w http.ResponseWriter, r *http.Request) {
	agent := Agent(r.Context())
	workspace := s.gw.Snapshot().Agents[agent].Workspace
	if workspace == "" {
		workspace = proto.WorkspacePath
	}
	call := &gateway.Call{Agent: agent, Tool: r.PathValue("name"), Via: "socket"}
	if p, ok := PeerOf(r.Context()); ok {
		call.Detail = map[string]any{"peer": p}
	}

	media, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	media = strings.ToLower(strings.TrimSpace(media))
	var raw []byte
	var body *bufio.Reader
	var err error
	switch media {
	case "", "application/json":
		raw, err = io.ReadAll(io.LimitReader(r.Body, s.opts.MaxHeader+1))
		if err == nil && int64(len(raw)) > s.opts.MaxHeader {
			err = fmt.Errorf("%w: request body over the limit of %d bytes", proto.ErrTooLarge, s.opts.MaxHeader)
		}
	case api.MediaNDJSON:
		// Stdin frames are read while output frames are written.
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			wire.WriteError(w, http.StatusInternalServerError, &api.Error{Code: "internal", Message: err.Error()})
			return
		}
		body = bodyReaders.Get().(*bufio.Reader)
		body.Reset(r.Body)
		// Put back when the call is done: its body pump, the last to read
		// it, has ended by then.
		defer func() {
			body.Reset(nil)
			bodyReaders.Put(body)
		}()
		raw, err = proto.ReadLine(body, s.opts.MaxHeader)
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: empty request: the first frame must be the call header", proto.ErrMalformed)
		}
	default:
		dec := gateway.Decision{Rule: RuleMalformed, Reason: "Content-Type must be application/json or " + api.MediaNDJSON}
		wire.Refused(w, http.StatusUnsupportedMediaType, "bad_request", s.gw.Refuse(agent, call, dec))
		return
	}
	var hdr *proto.CallHeader
	if err == nil {
		hdr, err = proto.ParseCallHeader(raw, workspace)
	}
	// Every refused header is on the record like any denial (counted per
	// agent by the gateway, so a flood of them cannot fill the disk).
	switch {
	case errors.Is(err, proto.ErrTooLarge):
		wire.Refused(w, http.StatusRequestEntityTooLarge, "too_large", s.gw.Refuse(agent, call, gateway.Decision{Rule: RuleTooLarge, Reason: err.Error()}))
		return
	case errors.Is(err, proto.ErrCwd):
		call.Args = hdr.Args()
		wire.Refused(w, http.StatusBadRequest, "bad_request", s.gw.Refuse(agent, call, gateway.Decision{Rule: "args.invalid", Reason: err.Error()}))
		return
	case err != nil:
		call.Detail = withDetail(call.Detail, "headerBytes", len(raw))
		wire.Refused(w, http.StatusBadRequest, "bad_request", s.gw.Refuse(agent, call, gateway.Decision{Rule: RuleMalformed, Reason: err.Error()}))
		return
	}
	call.Args, call.Session, call.Parent = hdr.Args(), hdr.Session, hdr.Parent

	// The socket serves plugin tools only; core tools are the host's to call.
	if t, ok := s.gw.Snapshot().Tools[call.Tool]; ok && t.Kind() != gateway.KindTool {
		dec := gateway.Decision{Rule: "socket.kind", Reason: fmt.Sprintf("%s is a %s, not callable through the agent socket", call.Tool, t.Kind())}
		wire.Refused(w, http.StatusForbidden, "denied", s.gw.Refuse(agent, call, dec))
		return
	}

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	out := wire.NewLazy(w, call, func(err error) { cancel(fmt.Errorf("client gone: %w", err)) })
	streams := out.Streams(nil)
	var pumped chan struct{}
	var stdin *io.PipeReader
	var sawEOF atomic.Bool
	if body != nil {
		// A streamed call ends its connection: net/http must never read a
		// next request while the body pump's last read may still be winding
		// down (it panics on a concurrent Body.Read). A launcher makes one
		// call per connection anyway.
		w.Header().Set("Connection", "close")
		var pw *io.PipeWriter
		stdin, pw = io.Pipe()
		streams.Stdin = stdin
		pumped = make(chan struct{})
		go func() {
			defer close(pumped)
			_, err := io.Copy(pw, proto.NewStdinReader(body, s.opts.MaxHeader))
			pw.CloseWithError(err)
			if err != nil {
				if !errors.Is(err, io.ErrClosedPipe) {
					cancel(fmt.Errorf("request stream broken: %w", err)) // the client went away
				}
				return
			}
			// Reading the body to its end lets the server watch the
			// connection, so a client that goes away cancels the call.
			sawEOF.Store(true)
			_, _ = io.Copy(io.Discard, body)
		}()
	}

	res, err := s.gw.Handle(ctx, call, streams)
	if pumped != nil {
		// The handler may not read the body after it returns: stop the
		// pump. After the eof frame a client ends the body at once; a read
		// cut by the deadline must not be one that reached the body's end
		// (the server would start watching the connection twice).
		stdin.CloseWithError(io.ErrClosedPipe)
		stop := func() { _ = http.NewResponseController(w).SetReadDeadline(time.Now()) }
		if !sawEOF.Load() {
			stop()
		}
		select {
		case <-pumped:
		case <-time.After(bodyEndWait):
			stop()
			<-pumped
		}
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil && r.Context().Err() == nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
	}
	out.Finish(res, err)
}
