package docker

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
)

// engineProxy relays a Unix socket to the real Engine until cut: then the
// Engine is gone for whoever used the proxy, while the containers run on.
type engineProxy struct {
	path  string
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startEngineProxy(t *testing.T, host string) *engineProxy {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil || u.Scheme != "unix" {
		t.Fatalf("the Engine proxy relays a unix socket, not %q", host)
	}
	p := &engineProxy{path: filepath.Join(t.TempDir(), "engine.sock")}
	if p.ln, err = net.Listen("unix", p.path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", u.Path)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// cut stops answering: the socket goes and every relayed connection ends.
func (p *engineProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestEngineLostIsNotAStoppedSandbox: with the Engine gone and the sandbox
// running, calls go on through the warm executor; a call that breaks off is
// reported as the Engine being unreachable — not as a stopped container,
// which would mark the sandbox for recreation and fail every later call —
// and no message sends the user to rebuild an image.
func TestEngineLostIsNotAStoppedSandbox(t *testing.T) {
	spec, _ := newAgent(t)
	ctx := context.Background()
	proxy := startEngineProxy(t, testMgr.cli.DaemonHost())
	m, err := New(ctx, Options{Instance: testInstance(), Host: "unix://" + proxy.path})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	box, err := m.Ensure(ctx, spec) // re-attaches to the running container
	if err != nil {
		t.Fatal(err)
	}
	proxy.cut()

	call := func(argv ...string) execResult {
		sb, err := m.Sandbox(ctx, spec.Agent)
		if err != nil {
			return execResult{err: err}
		}
		return run(ctx, sb, gateway.ExecSpec{Argv: argv})
	}
	if r := call("echo", "hi"); r.err != nil || r.stdout != "hi\n" {
		t.Fatalf("a call with the Engine gone: %+v", r)
	}
	// The executor dies under the call (init restarts it): the host cannot
	// ask the Engine what happened.
	r := call("sh", "-c", "kill -9 $PPID; sleep 5")
	if r.err == nil || !strings.Contains(r.err.Error(), "Docker Engine is unreachable") || wrongVerdict(r.err) {
		t.Fatalf("a call broken off with the Engine gone: %v", r.err)
	}
	// Once init has the executor back, calls go through it again (the
	// sandbox was not marked for recreation, which the Engine could not do).
	waitExecutor(t, box)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := call("echo", "again")
		if r.err == nil && r.stdout == "again\n" {
			break
		}
		if wrongVerdict(r.err) || time.Now().After(deadline) {
			t.Fatalf("a later call with the Engine gone: %v, stdout %q", r.err, r.stdout)
		}
	}
	_, err = m.Ensure(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "Docker Engine is unreachable") || wrongVerdict(err) {
		t.Fatalf("Ensure with the Engine gone: %v", err)
	}
	// That failed Ensure (a reload's) leaves the verified sandbox in use.
	if r := call("echo", "still"); r.err != nil || r.stdout != "still\n" {
		t.Fatalf("a call after a failed Ensure with the Engine gone: %+v", r)
	}
}

// wrongVerdict tells whether err calls a lost Engine a stopped sandbox or a
// bad image. It asks errors.Is, not the text: the agent's name, made from
// this test's, holds the word "stopped".
func wrongVerdict(err error) bool {
	return err != nil && (errors.Is(err, sandbox.ErrGone) || strings.Contains(err.Error(), "sandbox image"))
}
