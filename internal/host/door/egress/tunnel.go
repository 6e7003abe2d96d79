package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrIdleTimeout ends a tunnel in which neither side sent anything for
	// the idle timeout.
	ErrIdleTimeout = errors.New("egress: tunnel idle timeout")
	// ErrByteLimit ends a tunnel that carried its maximum number of bytes.
	ErrByteLimit = errors.New("egress: tunnel byte limit reached")
)

// Limits bound one tunnel.
type Limits struct {
	IdleTimeout time.Duration // no bytes either way for this long ends it; 0: 5 minutes
	MaxBytes    int64         // both directions together; 0: unlimited
}

// Stats is what a tunnel carried.
type Stats struct {
	Up   int64 // client → upstream
	Down int64 // upstream → client
}

const tunnelBuf = 32 << 10

// Tunnel copies client ⇄ upstream until both sides finish, the idle timeout
// or byte limit is reached, or ctx ends. It owns both connections and closes
// them before returning. A clean end (EOF both ways) returns a nil error.
func Tunnel(ctx context.Context, client, upstream net.Conn, l Limits) (Stats, error) {
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 5 * time.Minute
	}
	t := &tunnel{limits: l, client: client, upstream: upstream}
	t.last.Store(time.Now().UnixNano())

	stop := context.AfterFunc(ctx, func() { t.fail(context.Cause(ctx)) }) // why it was ended, for the record
	defer stop()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); t.pipe(upstream, client, &t.up) }()
	go func() { defer wg.Done(); t.pipe(client, upstream, &t.down) }()
	wg.Wait()
	t.closeBoth()

	st := Stats{Up: t.up.Load(), Down: t.down.Load()}
	if p := t.err.Load(); p != nil {
		return st, *p
	}
	return st, nil
}

type tunnel struct {
	limits           Limits
	client, upstream net.Conn
	up, down, total  atomic.Int64
	last             atomic.Int64 // unix nanos of the last byte either way
	err              atomic.Pointer[error]
	closeOnce        sync.Once
}

// fail records the first reason the tunnel ends and unblocks both pipes.
func (t *tunnel) fail(err error) {
	t.err.CompareAndSwap(nil, &err)
	t.closeBoth()
}

// exhausted ends a tunnel that used up its byte allowance without cutting
// off what the other direction read within it and is still writing: it wakes
// both reads, so each pipe finds nothing left and returns, and leaves the
// closing to Tunnel.
func (t *tunnel) exhausted() {
	err := ErrByteLimit
	t.err.CompareAndSwap(nil, &err)
	past := time.Unix(1, 0)
	t.client.SetReadDeadline(past)
	t.upstream.SetReadDeadline(past)
}

func (t *tunnel) closeBoth() {
	t.closeOnce.Do(func() {
		t.client.Close()
		t.upstream.Close()
	})
}

// pipe copies src → dst. The read deadline is the idle timeout counted
// from the last byte in either direction, so a one-way download is not
// mistaken for idleness, while a silent pair is cut off.
func (t *tunnel) pipe(dst, src net.Conn, n *atomic.Int64) {
	buf := make([]byte, tunnelBuf)
	idle := t.limits.IdleTimeout
	for {
		if err := src.SetReadDeadline(time.Unix(0, t.last.Load()).Add(idle)); err != nil {
			t.fail(err)
			return
		}
		want := buf
		if m := t.limits.MaxBytes; m > 0 {
			left := m - t.total.Load()
			if left <= 0 {
				t.exhausted()
				return
			}
			if left < int64(len(want)) {
				want = want[:left]
			}
		}
		k, rerr := src.Read(want)
		limited := false
		if m := t.limits.MaxBytes; m > 0 && k > 0 {
			// The other direction may have read against the same
			// allowance meanwhile: count first, pass on only what fits.
			if over := t.total.Add(int64(k)) - m; over > 0 {
				k -= int(min(over, int64(k)))
				limited = true
			}
		}
		if k > 0 {
			now := time.Now()
			t.last.Store(now.UnixNano())
			// A peer that stops reading must not pin the tunnel either.
			if err := dst.SetWriteDeadline(now.Add(idle)); err != nil {
				t.fail(err)
				return
			}
			if _, werr := dst.Write(want[:k]); werr != nil {
				if errors.Is(werr, os.ErrDeadlineExceeded) {
					werr = ErrIdleTimeout
				}
				t.fail(werr)
				return
			}
			n.Add(int64(k))
		}
		if limited {
			t.exhausted()
			return
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			if time.Since(time.Unix(0, t.last.Load())) < idle {
				continue // the other direction was busy
			}
			t.fail(ErrIdleTimeout)
			return
		case errors.Is(rerr, io.EOF):
			// Half-close: let the other side finish its reply.
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			} else {
				t.closeBoth()
			}
			return
		default:
			t.fail(rerr)
			return
		}
	}
}
