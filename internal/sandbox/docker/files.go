package docker

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

// maxFileHeader bounds the header line `toolgate-client get` prints first.
const maxFileHeader = 256

// ReadFile reads a file through `toolgate-client get` run inside the
// sandbox as its user: symlinks resolve inside the container, never on the
// host, and the sandbox's permissions apply. It returns at most limit bytes
// (limit < 0: all) and the file's full size.
func (s *Sandbox) ReadFile(ctx context.Context, p string, limit int64) (*gateway.File, error) {
	if err := checkAbs(p); err != nil {
		return nil, err
	}
	if err := s.calls.enter(ctx); err != nil {
		return nil, err
	}
	defer s.calls.leave()
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
	if err := s.argvIO(ctx, "read "+p, nil, capped.NewWriter(&out, keep, nil), argv...); err != nil {
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

// WriteFile atomically replaces a file through `toolgate-client put` run
// inside the sandbox as its user: parents created, the content written to a
// temporary file beside the target, synced and renamed over it; an existing
// file keeps its mode. The size and digest go first, in argv, so a stream
// cut short (a gateway crash) leaves the old file, not a truncated one. No
// shell is involved, so any file name is safe.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	if err := checkAbs(p); err != nil {
		return err
	}
	if err := s.calls.enter(ctx); err != nil {
		return err
	}
	defer s.calls.leave()
	sum := sha256.Sum256(data)
	return s.argvIO(ctx, "write "+p, data, io.Discard, proto.ClientPath, "put", path.Clean(p),
		strconv.Itoa(len(data)), hex.EncodeToString(sum[:]))
}

// argvIO runs a helper command and turns a failure into an error naming what.
func (s *Sandbox) argvIO(ctx context.Context, what string, stdin []byte, stdout io.Writer, argv ...string) error {
	code, stderr, err := s.run(ctx, argv, stdin, stdout)
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

func checkAbs(p string) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("path %q is not absolute (paths are as the sandbox sees them)", p)
	}
	if bytes.IndexByte([]byte(p), 0) >= 0 {
		return errors.New("path contains a NUL byte")
	}
	return nil
}
