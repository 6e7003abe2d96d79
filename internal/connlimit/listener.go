// Package connlimit bounds what one client can hold open on a door of the
// gateway: how many connections each listener serves at once (sized from the
// process's file-descriptor limit so no door starves another), and how long a
// connection may sit idle or dribble a request in.
package connlimit

import (
	"net"
	"sync"
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
	done   chan struct{}
	once   sync.Once
}

// Listen wraps ln with a cap of n open connections, drawing also on shared
// when it is not nil.
func Listen(ln net.Listener, n int, shared Pool) *Listener {
	return &Listener{Listener: ln, own: NewPool(n), shared: shared, done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *Listener) Accept() (net.Conn, error) {
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
}

// Close closes the connection and frees its slot.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite keeps the half-close a hijacked connection (egress) relies on.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Unwrap returns the underlying connection (for SO_PEERCRED and the like).
func (c *Conn) Unwrap() net.Conn { return c.Conn }
