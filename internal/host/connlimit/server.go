package connlimit

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts bound how long a connection may hold a slot without progress.
type Timeouts struct {
	Header time.Duration // request line and headers must arrive within
	Body   time.Duration // a request body must arrive within, unless its route streams
	Idle   time.Duration // a keep-alive connection may wait for its next request
}

// Defaults are the timeouts of every door.
var Defaults = Timeouts{Header: 10 * time.Second, Body: 60 * time.Second, Idle: 90 * time.Second}

// Server returns an http.Server for h with t applied. There is no write
// timeout and no whole-request read timeout: exec output, egress tunnels and
// MCP event streams live as long as their call; a route whose request body
// is itself a stream (exec stdin, transcript ingestion) is marked Unbounded.
//
// The server also tells a listener that limits sources which connections
// are in a request (ConnContext: a server that sets its own calls this
// one's first).
func Server(h http.Handler, t Timeouts, errLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           inRequest(bodyDeadline(h, t.Body)),
		ReadHeaderTimeout: t.Header,
		IdleTimeout:       t.Idle,
		ErrorLog:          errLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if lc, ok := c.(*Conn); ok {
				ctx = context.WithValue(ctx, connKey{}, lc)
			}
			return ctx
		},
		ConnState: func(c net.Conn, s http.ConnState) {
			if lc, ok := c.(*Conn); ok && s == http.StateHijacked {
				lc.hijacked.Store(true)
			}
		},
	}
}

type connKey struct{}

// inRequest marks the connection in a request while h runs.
func inRequest(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*Conn); ok {
			c.inRequest.Store(true)
			defer c.inRequest.Store(false)
		}
		h.ServeHTTP(w, r)
	})
}

// Unbounded marks a route whose request body streams for as long as the
// call runs: it lifts the body deadline Server set.
func Unbounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		h.ServeHTTP(w, r)
	})
}

// Bounded marks a route whose answer is whole and small (/metrics): the
// client has d to take it, so a client that stops reading cannot keep its
// connection in a request, and out of reach of its source's other
// connections (Sources).
func Bounded(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		h.ServeHTTP(w, r)
	})
}

// bodyDeadline gives a request's body d to arrive, then lifts the deadline
// once the body is read: net/http keeps reading the connection behind a
// running handler to notice a client that leaves, and a deadline left in
// place would cancel a long call that had long since sent its body.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline when the body ends. A failed read
// keeps it: net/http closes that connection after the answer.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}
