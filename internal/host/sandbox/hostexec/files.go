package hostexec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"sync"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/lib/capped"
	"github.com/toolgate/toolgate/internal/proto"
)

// Runner runs a short helper argv in a sandbox (the backend's warm
// executor, else its own exec) and returns its exit code and bounded
// stderr. Stdin is nil for none; stdout goes to stdout (nil: kept with stderr).
type Runner func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) (code int, stderr string, err error)

// The file functions' errors say what went wrong, not the operation and
// the path: their caller names those ("read /workspace/a: …", coretools),
// and a message that named them again read "read X: read X: …".

// maxFileHeader bounds the header line `toolgate-client get` prints first.
const maxFileHeader = 256

// ReadFile reads a file through `toolgate-client get` run inside the
// sandbox as its user: symlinks resolve inside the sandbox, never on the
// host, and the sandbox's permissions apply. It returns at most limit bytes
// (limit < 0: all) and the file's full size.
func ReadFile(ctx context.Context, run Runner, p string, limit int64) (*gateway.File, error) {
	if err := CheckAbs(p); err != nil {
		return nil, err
	}
	argv := []string{proto.ClientPath, "get", p}
	if limit >= 0 {
		argv = append(argv, strconv.FormatInt(limit, 10))
	}
	// What comes back is the sandbox's word: at most the header and limit bytes are kept.
	keep := int64(maxFileHeader) + limit
	if limit < 0 {
		keep = math.MaxInt64
	}
	var out bytes.Buffer
	if err := argvIO(ctx, run, nil, capped.NewWriter(&out, keep, nil), argv...); err != nil {
		return nil, err
	}
	line, data, ok := bytes.Cut(out.Bytes(), []byte("\n"))
	var h proto.FileHeader
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if !ok || len(line) > maxFileHeader || dec.Decode(&h) != nil || h.Size < 0 || (limit >= 0 && int64(len(data)) > limit) {
		return nil, errMalformed
	}
	return &gateway.File{Path: p, Size: h.Size, Mode: h.Mode, Data: data}, nil
}

// ReadFileTo streams a file read as ReadFile reads it to w: check sees the
// file's header (size, mode) before any byte goes to w, and refuses the
// read by returning an error. At most limit bytes (limit < 0: all) are
// written; the returned File has no Data.
func ReadFileTo(ctx context.Context, run Runner, p string, limit int64, check func(*gateway.File) error, w io.Writer) (*gateway.File, error) {
	if err := CheckAbs(p); err != nil {
		return nil, err
	}
	argv := []string{proto.ClientPath, "get", p}
	if limit >= 0 {
		argv = append(argv, strconv.FormatInt(limit, 10))
	}
	fs := &fileStream{path: p, limit: limit, check: check, w: w}
	err := argvIO(ctx, run, nil, fs, argv...)
	if fs.err != nil { // ours, not the lost connection it caused
		return nil, fs.err
	}
	if err != nil {
		return nil, err
	}
	if fs.file == nil {
		return nil, errMalformed
	}
	return fs.file, nil
}

// fileStream parses the header `toolgate-client get` prints, then passes
// at most limit bytes on. Any failure is kept and fails every later write,
// which ends the helper.
type fileStream struct {
	path  string
	limit int64
	check func(*gateway.File) error
	w     io.Writer
	head  []byte
	file  *gateway.File
	sent  int64
	err   error
}

func (s *fileStream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := len(p)
	if s.file == nil {
		i := bytes.IndexByte(p, '\n')
		if i < 0 || len(s.head)+i > maxFileHeader {
			if len(s.head)+len(p) > maxFileHeader {
				return 0, s.fail(errMalformed)
			}
			s.head = append(s.head, p...)
			return n, nil
		}
		s.head = append(s.head, p[:i]...)
		p = p[i+1:]
		var h proto.FileHeader
		dec := json.NewDecoder(bytes.NewReader(s.head))
		dec.DisallowUnknownFields()
		if dec.Decode(&h) != nil || dec.More() || h.Size < 0 {
			return 0, s.fail(errMalformed)
		}
		s.file = &gateway.File{Path: s.path, Size: h.Size, Mode: h.Mode}
		if s.check != nil {
			if err := s.check(s.file); err != nil {
				return 0, s.fail(err)
			}
		}
	}
	if s.limit >= 0 && s.sent+int64(len(p)) > s.limit {
		return 0, s.fail(fmt.Errorf("%w (more than %d bytes)", errMalformed, s.limit))
	}
	if len(p) > 0 {
		if _, err := s.w.Write(p); err != nil {
			return 0, s.fail(err)
		}
		s.sent += int64(len(p))
	}
	return n, nil
}

func (s *fileStream) fail(err error) error {
	s.err = err
	return err
}

// WriteFile atomically replaces a file through `toolgate-client put` run
// inside the sandbox as its user: parents created, the content written to a
// temporary file beside the target, synced and renamed over it; an existing
// file keeps its mode. The size and digest go first, in argv, so a stream
// cut short (a gateway crash) leaves the old file, not a truncated one. No
// shell is involved, so any file name is safe.
func WriteFile(ctx context.Context, run Runner, p string, data []byte) error {
	if err := CheckAbs(p); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	return argvIO(ctx, run, bytes.NewReader(data), io.Discard, proto.ClientPath, "put", path.Clean(p),
		strconv.Itoa(len(data)), hex.EncodeToString(sum[:]))
}

// WriteFileFrom is WriteFile with the content streamed from r: its first
// size bytes, which must be all of it. The gateway hashes them on another
// core as they pass and returns their SHA-256; nothing here holds the
// content. Without want the digest follows the content to put as its
// commit mark: put replaces the file only after exactly size bytes and that
// one trailer (proto.PutDigestAfter), and does not hash them again; with
// want (stated before the bytes) it goes first, as WriteFile's, and the
// bytes must have it. Content shorter or longer
// than size, or not of want, is refused here and there: the file stays.
func WriteFileFrom(ctx context.Context, run Runner, p string, r io.Reader, size int64, want *[sha256.Size]byte) ([sha256.Size]byte, error) {
	if err := CheckAbs(p); err != nil {
		return [sha256.Size]byte{}, err
	}
	if size < 0 {
		return [sha256.Size]byte{}, fmt.Errorf("negative size %d", size)
	}
	digest := proto.PutDigestAfter
	if want != nil {
		digest = hex.EncodeToString(want[:])
	}
	body := newDigestBody(r, size, want)
	argv := []string{proto.ClientPath, "put", path.Clean(p), strconv.FormatInt(size, 10), digest}
	code, stderr, err := run(ctx, argv, body, io.Discard)
	sum, passed, bodyErr := body.close()
	switch {
	case bodyErr != nil:
		return sum, fmt.Errorf("%w; the file was left as it was", bodyErr)
	case err != nil:
		return sum, err
	case code == proto.ExitUsage && want == nil:
		return sum, fmt.Errorf("the sandbox's toolgate-client refused a streamed put (%s): it predates this gateway; restart the sandbox to update it, or state the content's SHA-256 (toolgate write --sha256)", stderr)
	case code != 0:
		return sum, helperFailed(argv, code, stderr)
	case !passed:
		return sum, errors.New("the sandbox's put answered before it took the whole content")
	}
	return sum, nil
}

// digestBody is put's stdin for WriteFileFrom: the first size bytes of r,
// hashed behind the copy (hashBehind), then — once r is found to end
// there and the digest is want, when given — the digest trailer. Anything
// wrong ends the stream without it (put refuses: no trailer, or, for the
// digest-first form, one byte past the size), and is kept for close.
type digestBody struct {
	r    io.Reader
	size int64
	left int64
	want *[sha256.Size]byte

	mu     sync.Mutex // Read may still run on the request writer's goroutine when close is called
	hb     *hashBehind
	closed bool
	done   bool // the content's end was reached and judged
	sum    [sha256.Size]byte
	err    error
	tail   []byte
}

func newDigestBody(r io.Reader, size int64, want *[sha256.Size]byte) *digestBody {
	// Buffers no larger than the content: a small write does not hold 4 MiB.
	buf := int(min(size, proto.MaxFramePayload))
	return &digestBody{r: r, size: size, left: size, want: want, hb: newHashBehind(4, buf)}
}

func (d *digestBody) Read(p []byte) (int, error) {
	if d.left > 0 {
		n, err := d.r.Read(p[:min(int64(len(p)), d.left)])
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.closed {
			return 0, io.EOF
		}
		d.left -= int64(n)
		for off := 0; off < n; { // the hasher gets its own copy: p is the caller's again on return
			b := d.hb.buffer()
			c := copy(b, p[off:n])
			d.hb.add(b[:c])
			off += c
		}
		switch {
		case err == nil || d.left == 0:
			return n, nil
		case errors.Is(err, io.EOF):
			err = fmt.Errorf("the content ended after %d of the %d bytes stated", d.size-d.left, d.size)
		default:
			err = fmt.Errorf("reading the content: %w", err)
		}
		d.finish(err)
		return n, io.EOF
	}
	if !d.done {
		var b [1]byte
		n, err := io.ReadFull(d.r, b[:])
		switch {
		case n > 0:
			err = fmt.Errorf("more content than the %d bytes stated", d.size)
		case errors.Is(err, io.EOF):
			err = nil
		case err != nil:
			err = fmt.Errorf("reading the content: %w", err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.closed {
			return 0, io.EOF
		}
		d.finish(err)
	} else {
		d.mu.Lock()
		defer d.mu.Unlock()
	}
	if len(d.tail) == 0 {
		return 0, io.EOF
	}
	n := copy(p, d.tail)
	d.tail = d.tail[n:]
	return n, nil
}

// finish judges the content once its end is reached (err: what was wrong
// with it) and sets what follows it. Called with mu held.
func (d *digestBody) finish(err error) {
	d.done, d.sum = true, d.hb.digest()
	if err == nil && d.want != nil && *d.want != d.sum {
		err = fmt.Errorf("the content's SHA-256 is %x, not the %x stated", d.sum, *d.want)
	}
	switch {
	case err == nil && d.want == nil:
		d.tail = proto.DigestTrailer(d.sum)
	case err != nil && d.want != nil && d.left == 0:
		// put with the digest first knows no trailer: one byte past the
		// size is what makes it refuse whole content the gateway did not.
		d.tail = []byte{0}
	}
	d.err = err
}

// close ends the stream where it stands and returns the content's digest,
// whether its end was reached (passed: whole, and judged good), and what
// was wrong with it.
func (d *digestBody) close() (sum [sha256.Size]byte, passed bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed && !d.done {
		d.hb.digest() // ends the hasher
	}
	d.closed = true
	return d.sum, d.done && d.err == nil, d.err
}

// hashBehind computes a stream's SHA-256 on a goroutine of its own while
// the gateway moves the bytes on: the copy and the digest use two cores,
// not one after the other. The caller takes a buffer, fills it, adds what
// it filled, and takes its next buffer only when done with that slice; a
// buffer comes back only once it is hashed, so at most bufs buffers of size
// bytes are held whatever the stream's length.
type hashBehind struct {
	free chan []byte
	work chan []byte
	sum  chan [sha256.Size]byte
}

func newHashBehind(bufs, size int) *hashBehind {
	hb := &hashBehind{free: make(chan []byte, bufs), work: make(chan []byte, bufs), sum: make(chan [sha256.Size]byte, 1)}
	for range bufs {
		hb.free <- make([]byte, size)
	}
	go func() {
		h := sha256.New()
		for p := range hb.work {
			h.Write(p)
			hb.free <- p[:cap(p)]
		}
		var s [sha256.Size]byte
		h.Sum(s[:0])
		hb.sum <- s
	}()
	return hb
}

// buffer is a free buffer, waiting while every one is still being hashed.
func (hb *hashBehind) buffer() []byte { return <-hb.free }

// add hashes p, a prefix of the last buffer, behind the caller.
func (hb *hashBehind) add(p []byte) { hb.work <- p }

// digest waits until everything added is hashed and returns the digest;
// it ends the hasher, and nothing may be added after it.
func (hb *hashBehind) digest() [sha256.Size]byte {
	close(hb.work)
	return <-hb.sum
}

// argvIO runs a helper command; a failure is its error.
func argvIO(ctx context.Context, run Runner, stdin io.Reader, stdout io.Writer, argv ...string) error {
	code, stderr, err := run(ctx, argv, stdin, stdout)
	if err != nil {
		return err
	}
	if code != 0 {
		return helperFailed(argv, code, stderr)
	}
	return nil
}

// helperFailed is a helper's failure: what it said on stderr (the
// client's messages name the file and what went wrong, as "open /x: no
// such file or directory"), else its exit code.
func helperFailed(argv []string, code int, stderr string) error {
	if stderr == "" {
		return fmt.Errorf("the sandbox's %s %s exited %d", path.Base(argv[0]), argv[1], code)
	}
	return errors.New(stderr)
}

// errMalformed is an answer from the sandbox's get that is not one.
var errMalformed = errors.New("malformed answer from the sandbox")

// CheckAbs refuses a path that is not absolute or holds a NUL byte.
func CheckAbs(p string) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("path %q is not absolute (paths are as the sandbox sees them)", p)
	}
	if bytes.IndexByte([]byte(p), 0) >= 0 {
		return errors.New("path contains a NUL byte")
	}
	return nil
}

// CapWriter keeps the first Max bytes and swallows the rest: a helper's
// stderr, which the sandbox decides.
type CapWriter struct {
	Buf []byte
	Max int
}

func (w *CapWriter) Write(p []byte) (int, error) {
	if room := w.Max - len(w.Buf); room > 0 {
		w.Buf = append(w.Buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Stderr is what was kept, trimmed.
func (w *CapWriter) Stderr() string { return string(bytes.TrimSpace(w.Buf)) }
