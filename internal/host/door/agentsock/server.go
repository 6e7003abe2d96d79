// Package agentsock serves the per-agent Unix sockets the sandboxes reach the
// gateway through. Identity is the socket that accepted the connection: each
// agent has its own, bind-mounted into its sandbox only, so the agent is known
// before a byte of the request is read and nothing in the payload can change
// it. Other packages mount their routes (hooks, egress, MCP) with Handle and
// read the caller with Agent(r.Context()).
package agentsock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/host/connlimit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// DefaultMaxHeader bounds a call header: the JSON body, or the first NDJSON
// frame, and every later stdin frame.
const DefaultMaxHeader = 1 << 20

// DefaultMaxConns bounds the connections one agent socket serves at once.
// Each holds a goroutine, a descriptor and up to a call header in memory,
// and the sandbox decides how many it opens: past the bound, further
// connections wait in the listen queue, so one agent cannot exhaust the
// gateway for the others. It is above egress's own per-agent limit, which
// refuses with a reason.
const DefaultMaxConns = 1024

// Options tune the server.
type Options struct {
	MaxHeader int64 // bytes; default DefaultMaxHeader
	MaxConns  int   // per agent socket; default DefaultMaxConns
	// Pool, when set, is shared by all agent sockets (the daemon sizes it
	// from the descriptor limit, connlimit.Plan).
	Pool     connlimit.Pool
	Timeouts connlimit.Timeouts // zero: connlimit.Defaults
	Logger   *slog.Logger
}

// Socket is one agent's listening socket on the host.
type Socket struct {
	Agent    string
	Path     string // e.g. sandbox.AgentSpec.SocketDir()/gateway.sock
	UID, GID int    // the sandbox user, who alone may connect
}

// Peer is the kernel's view of the connecting process (SO_PEERCRED), in the
// host's pid namespace.
type Peer struct {
	PID int32  `json:"pid"`
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

type ctxKey int

const (
	agentKey ctxKey = iota
	peerKey
)

// Agent is the identity of the socket that accepted the request; "" outside
// an agent socket.
func Agent(ctx context.Context) string {
	a, _ := ctx.Value(agentKey).(string)
	return a
}

// PeerOf returns the credentials of the process at the other end.
func PeerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey).(Peer)
	return p, ok
}

// Server serves every agent's socket with one set of routes.
type Server struct {
	gw   *gateway.Gateway
	opts Options
	mux  *http.ServeMux

	mu     sync.Mutex
	socks  map[string]*listener // by agent
	closed bool
}

type listener struct {
	Socket
	srv *http.Server
	ln  net.Listener
}

// New returns a server with the plugin-call route mounted.
func New(gw *gateway.Gateway, opts Options) *Server {
	if opts.MaxHeader <= 0 {
		opts.MaxHeader = DefaultMaxHeader
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.Timeouts == (connlimit.Timeouts{}) {
		opts.Timeouts = connlimit.Defaults
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{gw: gw, opts: opts, mux: http.NewServeMux(), socks: map[string]*listener{}}
	s.mux.HandleFunc("POST "+proto.CallPattern, s.call)
	return s
}

// Handle mounts a route on every agent socket (http.ServeMux patterns). The
// handler reads the caller with Agent(r.Context()) and PeerOf.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Serve starts listening on one agent's socket and returns once it accepts.
// A stale socket file is replaced; one another process answers on is not.
func (s *Server) Serve(agent, socketPath string, uid, gid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("agentsock: server closed")
	}
	if _, ok := s.socks[agent]; ok {
		return fmt.Errorf("agentsock: agent %q is already served", agent)
	}
	l, err := s.listen(Socket{Agent: agent, Path: socketPath, UID: uid, GID: gid})
	if err != nil {
		return err
	}
	s.socks[agent] = l
	return nil
}

// SetAgents makes the served sockets exactly socks (config reload): new
// agents get a socket, removed ones lose theirs (their calls in flight are
// cut), a changed path or owner is re-created. Errors are joined; the other
// sockets are still applied.
func (s *Server) SetAgents(socks []Socket) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("agentsock: server closed")
	}
	want := make(map[string]Socket, len(socks))
	for _, k := range socks {
		want[k.Agent] = k
	}
	var errs []error
	for agent, l := range s.socks {
		if k, ok := want[agent]; !ok || k != l.Socket {
			errs = append(errs, l.close())
			delete(s.socks, agent)
		}
	}
	for agent, k := range want {
		if _, ok := s.socks[agent]; ok {
			continue
		}
		l, err := s.listen(k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.socks[agent] = l
	}
	return errors.Join(errs...)
}

// Close stops every socket at once: connections are cut, so in-sandbox
// clients waiting on a call see the socket end and exit with ExitUnavailable.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for agent, l := range s.socks {
		errs = append(errs, l.close())
		delete(s.socks, agent)
	}
	return errors.Join(errs...)
}

func (s *Server) listen(k Socket) (*listener, error) {
	if k.Agent == "" || !filepath.IsAbs(k.Path) {
		return nil, fmt.Errorf("agentsock: socket for agent %q needs an absolute path, got %q", k.Agent, k.Path)
	}
	dir := filepath.Dir(k.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agentsock: %w", err)
	}
	// The directory stays the gateway's: the sandbox may connect, not swap
	// the socket for one of its own.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agentsock: %w", err)
	}
	if err := removeStale(k.Path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", k.Path)
	if err != nil {
		return nil, fmt.Errorf("agentsock: listening for agent %q: %w", k.Agent, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	ln = connlimit.Listen(ln, s.opts.MaxConns, s.opts.Pool)
	// Mode first, owner second: there is no moment the socket is open to all.
	err = os.Chmod(k.Path, 0o600)
	if err == nil && os.Geteuid() == 0 {
		err = os.Chown(k.Path, k.UID, k.GID)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("agentsock: socket permissions for agent %q: %w", k.Agent, err)
	}
	agent := k.Agent
	srv := connlimit.Server(s.routes(), s.opts.Timeouts, slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn))
	base := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		ctx = context.WithValue(base(ctx, c), agentKey, agent)
		if p, ok := peerCred(c); ok {
			ctx = context.WithValue(ctx, peerKey, p)
		}
		return ctx
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.opts.Logger.Error("agent socket stopped", "agent", agent, "path", k.Path, "err", err)
		}
	}()
	return &listener{Socket: k, srv: srv, ln: ln}, nil
}

// routes are the mounted routes; a call sent as NDJSON streams its stdin for
// as long as it runs, so its body has no deadline.
func (s *Server) routes() http.Handler {
	streams := connlimit.Unbounded(s.mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if media, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.EqualFold(strings.TrimSpace(media), api.MediaNDJSON) {
			streams.ServeHTTP(w, r)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// close closes the listener itself too: Serve runs in a goroutine and may
// not have taken it over yet, and closing it removes the socket file.
func (l *listener) close() error {
	err := errors.Join(l.ln.Close(), l.srv.Close())
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// removeStale deletes a socket file nobody answers on and refuses to take
// over one that is served.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agentsock: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("agentsock: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("agentsock: another gateway is serving on %s", path)
	}
	return os.Remove(path)
}

func peerCred(c net.Conn) (Peer, bool) {
	if w, ok := c.(interface{ Unwrap() net.Conn }); ok {
		c = w.Unwrap()
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return Peer{}, false
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, true
}
