package coretools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Read is the `read` core tool: a text file with line windowing, or any file
// base64-encoded on request, at most MaxReadFile bytes of it.
type Read struct{ *shared }

type readArgs struct {
	Path     string `json:"path"`
	Offset   *int   `json:"offset"`
	Limit    *int   `json:"limit"`
	Encoding string `json:"encoding"`
}

// ReadOutput is the result body of `read`.
type ReadOutput struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Lines is the window returned; absent for base64 reads.
	Lines *LineWindow `json:"lines,omitempty"`
	// Size is the file's full size on disk.
	Size int64 `json:"size"`
	// Truncated means the read cap cut the file: lines past it are not
	// reachable with offset, and Lines.Total counts only the kept part.
	Truncated bool   `json:"truncated"`
	Encoding  string `json:"encoding,omitempty"`
	// SHA256 is the digest of the bytes a raw read streamed.
	SHA256 string `json:"sha256,omitempty"`
}

// LineWindow says which lines a read returned: From..To of Total, 1-based,
// all zero when no line was returned.
type LineWindow struct {
	From  int `json:"from"`
	To    int `json:"to"`
	Total int `json:"total"`
}

func (*Read) Name() string       { return "read" }
func (*Read) Kind() gateway.Kind { return gateway.KindCore }

func (t *Read) parse(raw json.RawMessage) (*readArgs, error) {
	var a readArgs
	if err := decodeArgs("read", raw, &a); err != nil {
		return nil, err
	}
	switch a.Encoding {
	case "", "utf-8":
	case "base64", "raw":
		if a.Offset != nil || a.Limit != nil {
			return nil, fmt.Errorf("read: offset and limit count lines and do not apply to %s reads", a.Encoding)
		}
	default:
		return nil, fmt.Errorf("read: encoding must be \"utf-8\", \"base64\" or \"raw\", got %q", a.Encoding)
	}
	if a.Offset != nil && *a.Offset < 1 {
		return nil, fmt.Errorf("read: offset is the first line, 1-based; got %d", *a.Offset)
	}
	if a.Limit != nil && *a.Limit < 1 {
		return nil, fmt.Errorf("read: limit is a number of lines, at least 1; got %d", *a.Limit)
	}
	return &a, nil
}

func (t *Read) Prepare(call *gateway.Call, agent gateway.AgentInfo) error {
	a, err := t.parse(call.Args)
	if err != nil {
		return err
	}
	call.Path, err = resolvePath("path", a.Path, agent)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}

func (t *Read) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	ctx, cancel := t.fileDeadline(ctx, call.Agent)
	defer cancel()
	a, err := t.parse(call.Args)
	if err != nil {
		return nil, err
	}
	if call.Path == "" {
		return nil, errNotPrepared
	}
	if env.Sandbox == nil {
		return nil, errNoSandbox
	}
	capBytes := t.limitsOf(call.Agent).MaxReadFile
	if a.Encoding == "raw" {
		return readRaw(ctx, call, env, capBytes)
	}
	f, err := env.Sandbox.ReadFile(ctx, call.Path, capBytes)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", call.Path, err)
	}
	out := &ReadOutput{Path: call.Path, Size: f.Size, Truncated: f.Size > int64(len(f.Data))}
	if a.Encoding == "base64" {
		if out.Truncated {
			return nil, fmt.Errorf("read %s: file is %d bytes, over the read cap of %d bytes", call.Path, f.Size, capBytes)
		}
		out.Content = base64.StdEncoding.EncodeToString(f.Data)
		out.Encoding = "base64"
		return &gateway.Result{Output: out}, nil
	}
	data := f.Data
	if out.Truncated {
		data = cutToWholeLines(data)
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, fmt.Errorf("read %s: binary file (NUL byte at offset %d); %s", call.Path, i, BinaryHint)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("read %s: binary file (not valid UTF-8); %s", call.Path, BinaryHint)
	}
	offset, limit := 1, -1
	if a.Offset != nil {
		offset = *a.Offset
	}
	if a.Limit != nil {
		limit = *a.Limit
	}
	content, win, err := window(data, offset, limit)
	if err != nil {
		if out.Truncated {
			err = fmt.Errorf("%w (the read cap of %d bytes keeps only the first %d lines of this %d-byte file)", err, capBytes, win.Total, f.Size)
		}
		return nil, fmt.Errorf("read %s: %w", call.Path, err)
	}
	out.Content, out.Lines = content, &win
	return &gateway.Result{Output: out}, nil
}

// readRaw streams the whole file to the caller's stdout as bytes, refused
// before the first byte when it is over the read cap. The result and the
// audit (the call's detail) keep its size and SHA-256.
func readRaw(ctx context.Context, call *gateway.Call, env *gateway.RunEnv, capBytes int64) (*gateway.Result, error) {
	if env.IO == nil || env.IO.Stdout == nil {
		return nil, fmt.Errorf("read: encoding raw streams bytes, and this caller takes none (use base64)")
	}
	check := func(f *gateway.File) error {
		if f.Size > capBytes {
			return fmt.Errorf("read %s: file is %d bytes, over the read cap of %d bytes (limits.maxReadFile)", call.Path, f.Size, capBytes)
		}
		return nil
	}
	h := sha256.New()
	counted := &countWriter{w: io.MultiWriter(env.IO.Stdout, h)}
	if sr, ok := env.Sandbox.(gateway.StreamReader); ok {
		if _, err := sr.ReadFileTo(ctx, call.Path, capBytes, check, counted); err != nil {
			return nil, err
		}
	} else {
		f, err := env.Sandbox.ReadFile(ctx, call.Path, capBytes)
		if err == nil {
			err = check(f)
		}
		if err == nil {
			_, err = counted.Write(f.Data)
		}
		if err != nil {
			return nil, err
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	detail := resultDetail(call)
	detail["bytes"], detail["sha256"] = counted.n, sum
	return &gateway.Result{Output: &ReadOutput{Path: call.Path, Size: counted.n, Encoding: "raw", SHA256: sum}}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// BinaryHint ends the error of a text read of a binary file; the CLI
// replaces it with its own flag's name.
const BinaryHint = `read it with "encoding":"base64"`

// cutToWholeLines drops a trailing partial line from a capped read, or, when
// the cap holds no complete line, a trailing partial UTF-8 sequence.
func cutToWholeLines(data []byte) []byte {
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		return data[:i+1]
	}
	for n := 1; n < utf8.UTFMax && n <= len(data); n++ {
		if utf8.RuneStart(data[len(data)-n]) {
			if !utf8.FullRune(data[len(data)-n:]) {
				return data[:len(data)-n]
			}
			break
		}
	}
	return data
}

// window returns lines offset..offset+limit-1 (1-based; limit < 0: to the
// end), keeping their line endings.
func window(data []byte, offset, limit int) (string, LineWindow, error) {
	total := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		total++
	}
	win := LineWindow{Total: total}
	if total == 0 {
		if offset > 1 {
			return "", win, fmt.Errorf("offset %d is past the end of the file (empty)", offset)
		}
		return "", win, nil
	}
	if offset > total {
		return "", win, fmt.Errorf("offset %d is past the end of the file (%d lines)", offset, total)
	}
	start := 0
	for line := 1; line < offset; line++ {
		start += bytes.IndexByte(data[start:], '\n') + 1
	}
	end, to := start, offset-1
	for to < total && (limit < 0 || to-offset+1 < limit) {
		if i := bytes.IndexByte(data[end:], '\n'); i >= 0 {
			end += i + 1
		} else {
			end = len(data)
		}
		to++
	}
	win.From, win.To = offset, to
	return string(data[start:end]), win, nil
}
