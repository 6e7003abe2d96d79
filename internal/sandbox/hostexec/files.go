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

	"github.com/toolgate/toolgate/internal/capped"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/proto"
)

// Runner runs a short helper argv in a sandbox (the backend's warm
// executor, else its own exec) and returns its exit code and bounded
// stderr. Stdin is nil for none; stdout goes to stdout (nil: kept with stderr).
type Runner func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) (code int, stderr string, err error)

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
	if err := argvIO(ctx, run, "read "+p, nil, capped.NewWriter(&out, keep, nil), argv...); err != nil {
		return nil, err
	}
	line, data, ok := bytes.Cut(out.Bytes(), []byte("\n"))
	var h proto.FileHeader
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if !ok || len(line) > maxFileHeader || dec.Decode(&h) != nil || h.Size < 0 || (limit >= 0 && int64(len(data)) > limit) {
		return nil, fmt.Errorf("read %s: malformed answer from the sandbox", p)
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
	err := argvIO(ctx, run, "read "+p, nil, fs, argv...)
	if fs.err != nil { // ours, not the lost connection it caused
		return nil, fs.err
	}
	if err != nil {
		return nil, err
	}
	if fs.file == nil {
		return nil, fmt.Errorf("read %s: malformed answer from the sandbox", p)
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
				return 0, s.fail(fmt.Errorf("read %s: malformed answer from the sandbox", s.path))
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
			return 0, s.fail(fmt.Errorf("read %s: malformed answer from the sandbox", s.path))
		}
		s.file = &gateway.File{Path: s.path, Size: h.Size, Mode: h.Mode}
		if s.check != nil {
			if err := s.check(s.file); err != nil {
				return 0, s.fail(err)
			}
		}
	}
	if s.limit >= 0 && s.sent+int64(len(p)) > s.limit {
		return 0, s.fail(fmt.Errorf("read %s: malformed answer from the sandbox (more than %d bytes)", s.path, s.limit))
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
	return WriteFileFrom(ctx, run, p, bytes.NewReader(data), int64(len(data)), sha256.Sum256(data))
}

// WriteFileFrom is WriteFile with the content streamed from r, whose size and
// SHA-256 the caller states: the sandbox's put replaces the file only when it
// received exactly those bytes, so nothing here holds the content. At most
// size+1 bytes are taken from r — one more than stated makes put refuse.
func WriteFileFrom(ctx context.Context, run Runner, p string, r io.Reader, size int64, sum [sha256.Size]byte) error {
	if err := CheckAbs(p); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("write %s: negative size %d", p, size)
	}
	return argvIO(ctx, run, "write "+p, io.LimitReader(r, size+1), io.Discard, proto.ClientPath, "put", path.Clean(p),
		strconv.FormatInt(size, 10), hex.EncodeToString(sum[:]))
}

// argvIO runs a helper command and turns a failure into an error naming what.
func argvIO(ctx context.Context, run Runner, what string, stdin io.Reader, stdout io.Writer, argv ...string) error {
	code, stderr, err := run(ctx, argv, stdin, stdout)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		if stderr == "" {
			stderr = fmt.Sprintf("exit code %d", code)
		}
		return fmt.Errorf("%s: %s failed: %s", what, argv[0], stderr)
	}
	return nil
}

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
