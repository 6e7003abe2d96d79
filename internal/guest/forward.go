package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

func init() {
	commands["forward"] = command{"forward [--listen ADDR]: the sandbox's HTTP proxy, tunnelling through the gateway", cmdForward}
}

// Forwarder is the sandbox's HTTP proxy: CONNECT and absolute-form HTTP
// requests, each connection tunnelled over the agent socket to the
// gateway's egress guard, which decides, dials and audits. The sandbox has
// no network of its own; this is its only way out.
type Forwarder struct {
	socket string
	// hostLoopback admits the loopback targets that are the gateway
	// host's services (allowlisted egress); every other loopback target is
	// the sandbox's own and is dialled here, as NO_PROXY would have.
	hostLoopback proto.HostLoopback
	rp           *httputil.ReverseProxy
}

// NewForwarder tunnels through the agent socket at socket; hostLoopback
// are the egress rules naming services on the host's loopback.
func NewForwarder(socket string, hostLoopback proto.HostLoopback) *Forwarder {
	f := &Forwarder{socket: socket, hostLoopback: hostLoopback}
	f.rp = &httputil.ReverseProxy{
		// In.URL is absolute already; hop-by-hop headers, Proxy-Authorization
		// among them, are dropped by ReverseProxy itself.
		Rewrite: func(*httputil.ProxyRequest) {},
		Transport: &http.Transport{
			Proxy: nil, // this process's own HTTP_PROXY points at itself
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				parent, _ := ctx.Value(parentKey{}).(string)
				return f.dial(ctx, addr, parent)
			},
			// One tunnel per request: each is decided and audited with the
			// call that made it, never reused for another process's request.
			DisableKeepAlives:  true,
			DisableCompression: true,
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) { proxyFail(w, err) },
		ErrorLog:     log.New(io.Discard, "", 0),
	}
	return f
}

type parentKey struct{}

func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parent := proto.ProxyCallID(r.Header.Get("Proxy-Authorization"))
	switch {
	case r.Method == http.MethodConnect:
		f.connect(w, r, parent)
	case r.URL.IsAbs() && r.URL.Host != "" && (r.URL.Scheme == "http" || r.URL.Scheme == "https"):
		f.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), parentKey{}, parent)))
	default:
		http.Error(w, "toolgate egress proxy: send CONNECT host:port or an absolute-form request (GET http://host/path)", http.StatusBadRequest)
	}
}

func (f *Forwarder) connect(w http.ResponseWriter, r *http.Request, parent string) {
	up, err := f.dial(r.Context(), r.Host, parent)
	if err != nil {
		proxyFail(w, err)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "toolgate egress proxy: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return
	}
	splice(conn, brw.Reader, up)
}

// splice copies both ways, passing half-closes on, until both ends finish.
// Limits and timeouts are the gateway's: it ends a tunnel by closing it.
func splice(client net.Conn, clientR io.Reader, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, clientR)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(client, up)
		closeWrite(client)
	}()
	wg.Wait()
	client.Close()
	up.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	c.Close()
}

// ProxyError is a tunnel the gateway refused or could not open, with the
// HTTP status the proxy answers its client with.
type ProxyError struct {
	Status  int
	Message string
}

func (e *ProxyError) Error() string { return e.Message }

// dial connects to target: a loopback target that is not the host's is
// the sandbox's own service (a dev server, toolgate's in-sandbox doors)
// and is dialled directly; everything else goes through the gateway.
func (f *Forwarder) dial(ctx context.Context, target, parent string) (net.Conn, error) {
	if !f.hostLoopback.Routes(target) {
		c, err := (&net.Dialer{Timeout: proto.DialTimeout}).DialContext(ctx, "tcp", target)
		if err != nil {
			return nil, &ProxyError{http.StatusBadGateway, fmt.Sprintf("toolgate egress: %s is the sandbox's own loopback (not an allowlisted host service): %v", target, unwrapOp(err))}
		}
		return c, nil
	}
	return f.Tunnel(ctx, target, parent)
}

// Tunnel opens a connection to target (host:port) through the gateway,
// attributed to the exec call parent ("" for none).
func (f *Forwarder) Tunnel(ctx context.Context, target, parent string) (net.Conn, error) {
	d := net.Dialer{Timeout: proto.DialTimeout}
	c, err := d.DialContext(ctx, "unix", f.socket)
	if err != nil {
		return nil, &ProxyError{http.StatusBadGateway, fmt.Sprintf("toolgate egress: gateway unavailable at %s: %v", f.socket, unwrapOp(err))}
	}
	// The handshake — decision, audit, resolution and dial on the host —
	// ends with ctx (the client gave up).
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Path: proto.EgressPath},
		Host:   "toolgate",
		Header: http.Header{proto.HeaderTarget: {target}, "User-Agent": {Name}},
	}
	if parent != "" {
		req.Header.Set(proto.HeaderParent, parent)
	}
	br := bufio.NewReaderSize(c, 32<<10)
	var resp *http.Response
	if err = req.Write(c); err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		c.Close()
		return nil, &ProxyError{http.StatusBadGateway, fmt.Sprintf("toolgate egress: talking to the gateway: %v", unwrapOp(err))}
	}
	if resp.StatusCode != http.StatusOK {
		defer c.Close()
		return nil, refusal(resp)
	}
	return &tunnelConn{Conn: c, r: br}, nil
}

// refusal turns the gateway's error answer into the proxy's own.
func refusal(resp *http.Response) *ProxyError {
	var body struct {
		Error struct {
			Code, Message, Rule, ID string
		}
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
		e := body.Error
		msg = e.Message
		if e.Rule != "" {
			msg = fmt.Sprintf("%s by %s: %s", e.Code, e.Rule, msg)
		}
		if e.ID != "" {
			msg += " (audit id " + e.ID + ")"
		}
	}
	return &ProxyError{resp.StatusCode, "toolgate egress: " + msg}
}

// proxyFail answers the sandbox's client: the gateway's status (403
// denied, 429 too many connections, 400 bad target …), 502 otherwise.
func proxyFail(w http.ResponseWriter, err error) {
	status, msg := http.StatusBadGateway, "toolgate egress: "+err.Error()
	var pe *ProxyError
	if errors.As(err, &pe) {
		status, msg = pe.Status, pe.Message
	}
	w.Header().Set("Connection", "close")
	http.Error(w, msg, status)
}

// tunnelConn reads what the handshake's reader already buffered.
type tunnelConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *tunnelConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *tunnelConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// startForwarder serves the proxy from init when the sandbox has egress
// (TOOLGATE_EGRESS=1). A failure is reported, not fatal: PID 1 must live,
// and without the forwarder the sandbox simply has no way out.
func startForwarder(stderr io.Writer) {
	if os.Getenv(proto.EnvEgress) != "1" {
		return
	}
	hostLoopback := proto.ParseHostLoopback(os.Getenv(proto.EnvHostLoopback))
	ln, err := net.Listen("tcp", proto.ProxyAddr)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate-client init: egress forwarder: %v\n", err)
		return
	}
	go func() {
		if err := Forward(ln, NewForwarder(socketPath(), hostLoopback)); err != nil {
			fmt.Fprintf(stderr, "toolgate-client init: egress forwarder: %v\n", err)
		}
	}()
}

// Forward serves the proxy f on ln until it fails or is closed.
func Forward(ln net.Listener, f *Forwarder) error {
	srv := &http.Server{
		Handler:           f,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second, // bodies stream (uploads, tunnels): no body deadline
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	return srv.Serve(ln)
}

func cmdForward(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", proto.ProxyAddr, "address to serve the proxy on")
	hostLoopbackList := fs.String("host-loopback", os.Getenv(proto.EnvHostLoopback), "egress rules (host:port,…) naming services on the gateway host's loopback")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	hostLoopback := proto.ParseHostLoopback(*hostLoopbackList)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate-client forward: %v\n", err)
		return 1
	}
	if err := Forward(ln, NewForwarder(socketPath(), hostLoopback)); err != nil {
		fmt.Fprintf(stderr, "toolgate-client forward: %v\n", err)
		return 1
	}
	return 0
}

// socketPath is the agent socket: $TOOLGATE_SOCKET, else the mounted one.
func socketPath() string {
	if s := os.Getenv("TOOLGATE_SOCKET"); s != "" {
		return s
	}
	return proto.SocketPath
}
