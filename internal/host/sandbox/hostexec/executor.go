// Package hostexec is the host side of the in-sandbox client, shared by
// every sandbox backend: the warm executor's client (a Unix socket the
// sandbox can write, dialled with checks, and its output frames, parsed as
// the sandbox's word) and file I/O through `toolgate-client get/put` run
// by whatever runner the backend has. Backends add only how they reach the
// sandbox and how they tell a dead sandbox from a lost connection.
package hostexec

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
)

// KillGrace is how long the host waits past an exec's own timeout before it
// ends the call itself (the in-sandbox client normally does it first).
const KillGrace = 10 * time.Second

// Errors of Run. ErrNoExecutor: nothing ran, another path may run the call.
// ErrOvertime: the call outlived its timeout by KillGrace; the connection
// is closed and the caller should kill the call's group. ErrLost: the
// connection broke off with the call perhaps still running; whether the
// sandbox died is the backend's to find out.
var (
	ErrNoExecutor = errors.New("sandbox executor unavailable")
	ErrOvertime   = errors.New("command did not end after its timeout")
	ErrLost       = errors.New("connection to the sandbox executor lost")
)

// oPath is Linux's O_PATH, which package syscall does not define: a handle
// on the inode itself, opened without touching it (a FIFO does not block).
const oPath = 0x200000

// maxExecHead bounds the executor's response status line and headers.
const maxExecHead = 64 << 10

// Dial connects to the executor socket in dir, which the sandbox can
// write: the name is opened without following a symlink, must be a socket
// owned by uid, and the connection goes through /proc/self/fd to exactly
// that inode, so nothing planted there can redirect the gateway to another
// socket (the Engine's, the admin socket).
func Dial(ctx context.Context, dir string, uid int) (net.Conn, error) {
	c, _, err := dial(ctx, dir, uid)
	return c, err
}

// socketID names one executor socket: its device and inode. An executor
// that starts anew listens on a new one.
type socketID struct{ dev, ino uint64 }

func dial(ctx context.Context, dir string, uid int) (net.Conn, socketID, error) {
	dfd, err := syscall.Open(dir, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, socketID{}, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(dfd)
	fd, err := syscall.Openat(dfd, proto.ExecSocketName, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, socketID{}, &os.PathError{Op: "open", Path: proto.ExecSocketName, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, socketID{}, &os.PathError{Op: "fstat", Path: proto.ExecSocketName, Err: err}
	}
	id, err := checkSocket(&st, uid)
	if err != nil {
		return nil, socketID{}, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err == nil {
		proto.GrowSendBuffer(c) // a write's content
	}
	return c, id, err
}

// checkSocket refuses what is not a socket owned by uid.
func checkSocket(st *syscall.Stat_t, uid int) (socketID, error) {
	if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return socketID{}, fmt.Errorf("%s is not a socket (mode %o)", proto.ExecSocketName, st.Mode)
	}
	if int(st.Uid) != uid {
		return socketID{}, fmt.Errorf("%s is owned by uid %d, not the sandbox user %d", proto.ExecSocketName, st.Uid, uid)
	}
	return socketID{dev: st.Dev, ino: st.Ino}, nil
}

// currentSocket is the executor socket in dir now, checked as dial checks
// it, without opening it: whether a kept connection still goes to it.
func currentSocket(dir string, uid int) (socketID, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dir, proto.ExecSocketName), &st); err != nil {
		return socketID{}, err
	}
	return checkSocket(&st, uid)
}

// Run runs req on the warm executor serving in dir as uid. timeout is the
// call's own (the executor enforces it); Run closes the connection
// KillGrace later if the call has not ended. Errors wrap ErrNoExecutor,
// ErrOvertime or ErrLost, or are ctx's.
func Run(ctx context.Context, dir string, uid int, req *proto.ExecRequest, stdin io.Reader, stdout, stderr io.Writer, timeout time.Duration) (*gateway.ExecOutcome, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoExecutor, err)
	}
	line = append(line, '\n')
	body := io.Reader(bytes.NewReader(line))
	if stdin != nil {
		body = bulkBody{io.MultiReader(body, stdin)}
	}
	hreq, err := http.NewRequest(http.MethodPost, "http://executor"+proto.ExecRoute, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoExecutor, err)
	}
	// With stdin, chunked: it streams while output comes back. Without,
	// the body is the line alone, its length stated: the executor then
	// gives the command /dev/null.
	hreq.ContentLength = -1
	if stdin == nil {
		hreq.ContentLength = int64(len(line))
	}
	hreq.Header.Set("Accept", proto.ExecFramesMedia)
	hreq.Header.Set(proto.ExecBuiltinHeader, proto.ExecBuiltinPut)

	callCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, timeout+KillGrace)
		defer cancel()
	}
	// A call without stdin goes on a kept connection when there is one
	// (idleConns). A connection the executor has closed fails the write
	// (a Unix socket whose peer is gone takes nothing), and an executor
	// runs nothing of a request it has not wholly read: the call then
	// goes on a new connection, its body read anew.
	var ec *execConn
	if stdin == nil {
		if ec = idle.take(dir, uid); ec != nil && hreq.Write(ec.conn) != nil {
			ec.close()
			ec = nil
			hreq.Body = io.NopCloser(bytes.NewReader(line))
		}
	}
	sent := ec != nil
	if ec == nil {
		conn, id, err := dial(ctx, dir, uid)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoExecutor, err)
		}
		ec = newExecConn(conn, id)
	}
	kept := false
	defer func() {
		if !kept {
			ec.close()
		}
	}()
	conn, br := ec.conn, ec.br
	// Closing the connection is how a call is cancelled: the executor
	// kills the process group when its request's connection goes away.
	stop := context.AfterFunc(callCtx, func() { conn.Close() })
	defer stop()
	// A failed write shows in the response read below.
	switch {
	case sent:
	case stdin == nil:
		_ = hreq.Write(conn) // small: the socket's buffer takes it, no goroutine needed
	default:
		go func() { _ = hreq.Write(conn) }()
	}

	ec.lim.left = maxExecHead
	resp, err := http.ReadResponse(br, hreq)
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		if stdin != nil {
			// Nothing ran, but stdin may be partly read: no second try.
			return nil, fmt.Errorf("exec: the sandbox executor refused the call: %s", resp.Status)
		}
		return nil, fmt.Errorf("%w: executor answered %s", ErrNoExecutor, resp.Status)
	}
	var out *gateway.ExecOutcome
	// A writer of the caller's that fails (a read refused by its check, a
	// client gone) ends the call, but the sandbox is not lost: that error
	// is returned as it is, not as ErrLost, whose callers go on to ask
	// whether the container stopped (half a second's wait).
	so, se := &FailedWriter{W: stdout}, &FailedWriter{W: stderr}
	if err == nil {
		ec.lim.left = -1
		// No Close: it would read on to the body's end, which the
		// sandbox decides; the connection is closed on return instead,
		// or kept.
		out, err = readFrames(resp, so, se)
		// Kept for the next call when the answer ended with the exit
		// frame, its body's end already here, nothing after it, and the
		// call not cancelled (which closes the connection).
		kept = err == nil && stdin == nil && !resp.Close && endsNow(conn, resp.Body, br) && stop() &&
			idle.put(dir, ec)
	}
	switch {
	case err == nil:
		return out, nil
	case so.Err != nil || se.Err != nil:
		return nil, cmp.Or(so.Err, se.Err)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case callCtx.Err() != nil:
		return nil, fmt.Errorf("%w (%s past it)", ErrOvertime, KillGrace)
	}
	return nil, fmt.Errorf("%w: %v", ErrLost, err)
}

// FailedWriter passes writes on to W and keeps the first error W gave:
// how an exec tells its caller's writer failing (the caller's error, the
// sandbox fine) from its output breaking off (the sandbox perhaps gone).
type FailedWriter struct {
	W   io.Writer
	Err error
	// OnFail, when set, is called at the first error: for a stream that
	// would otherwise go on until the command ends (pods/exec).
	OnFail func()
}

func (f *FailedWriter) Write(p []byte) (int, error) {
	n, err := f.W.Write(p)
	if err != nil && f.Err == nil {
		f.Err = err
		if f.OnFail != nil {
			f.OnFail()
		}
	}
	return n, err
}

// responseReaders keep Run's 64 KiB response readers: a fresh one per exec
// was most of the gateway's garbage under many small calls at once.
var responseReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// execConn is a connection to an executor and, while a call uses it, its
// response reader (a kept connection has nothing buffered, and holds none).
type execConn struct {
	conn net.Conn
	sock socketID // the socket it was dialled through
	lim  *headLimit
	br   *bufio.Reader
	idle time.Time // since when it is kept
}

func newExecConn(conn net.Conn, sock socketID) *execConn {
	ec := &execConn{conn: conn, sock: sock, lim: &headLimit{r: conn}}
	ec.reader()
	return ec
}

func (ec *execConn) reader() {
	ec.br = responseReaders.Get().(*bufio.Reader)
	ec.br.Reset(ec.lim)
}

func (ec *execConn) release() {
	ec.br.Reset(nil)
	responseReaders.Put(ec.br)
	ec.br = nil
}

func (ec *execConn) close() {
	ec.conn.Close()
	if ec.br != nil {
		ec.release()
	}
}

// endsNow reports whether the answer's body ends with what has already
// come (an executor sends its end with the exit frame) and nothing
// follows, without waiting on the sandbox: the read may not go to conn.
func endsNow(conn net.Conn, body io.Reader, br *bufio.Reader) bool {
	if conn.SetReadDeadline(time.Unix(1, 0)) != nil {
		return false
	}
	var b [1]byte
	n, err := body.Read(b[:])
	return n == 0 && err == io.EOF && br.Buffered() == 0 && conn.SetReadDeadline(time.Time{}) == nil
}

// Kept connections: a call without stdin reuses one to the same executor
// instead of dialling (the checks, the connect, the executor's accept and
// its new connection): ~5% of the sandbox's CPU per `exec true`. One is
// taken only while the executor socket in its directory is still the one
// it was dialled through (a sandbox made anew has a new executor, on a new
// socket), and only for idleFor — well inside the executor's own 90 s.
const (
	idleFor    = 20 * time.Second
	idlePerDir = 16
)

var idle = &idleConns{m: map[string][]*execConn{}}

type idleConns struct {
	mu    sync.Mutex
	m     map[string][]*execConn // by executor directory, most recent last
	swept time.Time
}

// take returns a kept connection to the executor now serving in dir, or
// nil; the ones that can no longer be used are closed.
func (p *idleConns) take(dir string, uid int) *execConn {
	p.mu.Lock()
	if len(p.m[dir]) == 0 {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	sock, err := currentSocket(dir, uid)
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := p.m[dir]; len(l) > 0; l = p.m[dir] {
		ec := l[len(l)-1]
		p.m[dir] = l[:len(l)-1]
		if err == nil && ec.sock == sock && time.Since(ec.idle) < idleFor {
			ec.reader()
			return ec
		}
		ec.close()
	}
	delete(p.m, dir)
	return nil
}

// put keeps ec for the next call to dir, unless enough are kept. Once
// per idleFor it also closes what no call took in time (an agent removed,
// a sandbox no longer called).
func (p *idleConns) put(dir string, ec *execConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.swept) >= idleFor {
		p.swept = now
		for d, l := range p.m {
			fresh := l[:0]
			for _, old := range l {
				if now.Sub(old.idle) < idleFor {
					fresh = append(fresh, old)
				} else {
					old.close()
				}
			}
			if p.m[d] = fresh; len(fresh) == 0 {
				delete(p.m, d)
			}
		}
	}
	if len(p.m[dir]) >= idlePerDir {
		return false
	}
	ec.release()
	ec.idle = now
	p.m[dir] = append(p.m[dir], ec)
	return true
}

// bulkBody is a request body the HTTP client copies read by read
// (proto.Pump), each read one chunk of the request: a large stdin (a
// write's content) goes in few chunks of up to proto.MaxFramePayload, a
// small one as soon as it is read. (Copied as any reader, it would go in
// 32 KiB chunks.)
type bulkBody struct{ r io.Reader }

func (b bulkBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b bulkBody) WriteTo(w io.Writer) (int64, error) {
	var written int64
	err := proto.Pump(b.r, 0, proto.MaxFramePayload, func(p []byte) error {
		n, err := w.Write(p)
		written += int64(n)
		return err
	})
	return written, err
}

// headLimit bounds what may be read while left >= 0.
type headLimit struct {
	r    io.Reader
	left int64
}

func (h *headLimit) Read(p []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(p)
	}
	if h.left == 0 {
		return 0, errors.New("executor response head too large")
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= int64(n)
	return n, err
}

// readFrames copies the executor's output frames (proto.ReadExecFrames)
// to stdout and stderr and returns the exit frame; any other answer is an
// error, not output.
func readFrames(resp *http.Response, stdout, stderr io.Writer) (*gateway.ExecOutcome, error) {
	if media := resp.Header.Get("Content-Type"); media != proto.ExecFramesMedia {
		// A toolgate-client from before binary frames answers NDJSON: its
		// sandbox is recreated at the gateway's next ensure.
		return nil, fmt.Errorf("%w: executor answered with Content-Type %q, not exec frames", proto.ErrBadFrame, media)
	}
	exit, err := proto.ReadExecFrames(resp.Body, stdout, stderr)
	if err != nil {
		return nil, err
	}
	return &gateway.ExecOutcome{ExitCode: exit.ExitCode, TimedOut: exit.TimedOut}, nil
}
