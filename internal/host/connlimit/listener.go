// Package connlimit bounds what one client can hold open on a door of the
// gateway: how many connections each listener serves at once (sized from the
// process's file-descriptor limit so no door starves another), and how long a
// connection may sit idle or dribble a request in.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Pool is a count of connection slots several listeners share (the agent
// sockets draw on one pool, so adding agents does not add descriptors).
type Pool chan struct{}

// NewPool returns a pool of n slots.
func NewPool(n int) Pool { return make(Pool, max(n, 1)) }

// Listener accepts a connection only while fewer than its own cap are open,
// and, when it draws on a shared pool, while the pool has a slot. Past either
// it stops accepting: further connections wait in the kernel's listen queue
// and hold no descriptor of ours.
type Listener struct {
	net.Listener
	own    Pool
	shared Pool // nil: own cap only
	srcs   *Sources
	done   chan struct{}
	once   sync.Once
}

// Listen wraps ln with a cap of n open connections, drawing also on shared
// when it is not nil.
func Listen(ln net.Listener, n int, shared Pool) *Listener {
	return &Listener{Listener: ln, own: NewPool(n), shared: shared, done: make(chan struct{})}
}

// LimitSources caps each source's connections with s (a TCP listener's);
// call it before the listener serves.
func (l *Listener) LimitSources(s *Sources) *Listener {
	l.srcs = s
	return l
}

// Accept waits for a free slot, then for a connection, and hands it on
// unless its source refuses it.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.accept()
		if err != nil || l.srcs == nil || l.srcs.admit(c) {
			return c, err
		}
	}
}

func (l *Listener) accept() (*Conn, error) {
	select {
	case l.own <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	if l.shared != nil {
		select {
		case l.shared <- struct{}{}:
		case <-l.done:
			<-l.own
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.release()
		return nil, err
	}
	return &Conn{Conn: c, release: l.release}, nil
}

func (l *Listener) release() {
	if l.shared != nil {
		<-l.shared
	}
	<-l.own
}

// Close stops Accept, also while it waits for a slot.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Conn gives its slot back once, on the first Close.
type Conn struct {
	net.Conn
	once    sync.Once
	release func()
	// source and sources: whom it counts against, when the listener
	// limits sources; set before Accept returns it.
	source    string
	sources   *Sources
	inRequest atomic.Bool // a handler is running for it
	hijacked  atomic.Bool // a handler took it over: it is in use until closed
}

// Close closes the connection and frees its slot.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.sources != nil {
			c.sources.remove(c)
		}
		c.release()
	})
	return err
}

// idle reports whether c carries no request: nothing sent yet, or waiting
// between requests.
func (c *Conn) idle() bool { return !c.inRequest.Load() && !c.hijacked.Load() }

// CloseWrite keeps the half-close a hijacked connection (egress) relies on.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Unwrap returns the underlying connection (for SO_PEERCRED and the like).
func (c *Conn) Unwrap() net.Conn { return c.Conn }
