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
	"strings"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Write is the `write` core tool: replace a file atomically with the given
// content, creating parent directories, at most MaxWrite bytes.
type Write struct{ *shared }

type writeArgs struct {
	Path     string  `json:"path"`
	Content  *string `json:"content"`
	Encoding string  `json:"encoding"`
	// Size stands for content sent as the call's raw body (the admin API's
	// application/octet-stream): the bytes never become JSON. SHA256, when
	// the caller states it, is checked against the bytes.
	Size   *int64 `json:"size"`
	SHA256 string `json:"sha256"`
}

// WriteOutput is the result body of `write`.
type WriteOutput struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	// SHA256 is the digest of the bytes written, as the gateway saw them.
	SHA256 string `json:"sha256"`
}

func (*Write) Name() string       { return "write" }
func (*Write) Kind() gateway.Kind { return gateway.KindCore }

// parse returns the arguments and the bytes to write (none for a raw body).
func (t *Write) parse(raw json.RawMessage, agent string) (*writeArgs, []byte, error) {
	var a writeArgs
	if err := decodeArgs("write", raw, &a); err != nil {
		return nil, nil, err
	}
	max := t.limitsOf(agent).MaxWrite
	if a.Size != nil || a.SHA256 != "" {
		return &a, nil, checkRawBody(&a, max)
	}
	if a.Content == nil {
		return nil, nil, fmt.Errorf("write: content is required (use \"\" for an empty file)")
	}
	var data []byte
	switch a.Encoding {
	case "", "utf-8":
		if int64(len(*a.Content)) > max {
			return nil, nil, fmt.Errorf("write: content is %d bytes, over the write limit of %d bytes", len(*a.Content), max)
		}
		data = []byte(*a.Content)
	case "base64":
		if int64(base64.StdEncoding.DecodedLen(len(*a.Content))) > max+2 {
			return nil, nil, fmt.Errorf("write: content is about %d bytes decoded, over the write limit of %d bytes", base64.StdEncoding.DecodedLen(len(*a.Content)), max)
		}
		var err error
		if data, err = base64.StdEncoding.DecodeString(*a.Content); err != nil {
			return nil, nil, fmt.Errorf("write: content is not valid base64: %v", err)
		}
		if int64(len(data)) > max {
			return nil, nil, fmt.Errorf("write: content is %d bytes decoded, over the write limit of %d bytes", len(data), max)
		}
	default:
		return nil, nil, fmt.Errorf("write: encoding must be \"utf-8\" or \"base64\", got %q", a.Encoding)
	}
	return &a, data, nil
}

// checkRawBody checks the facts of content sent as a raw body: its size
// (all a decision needs beside the path) and, if stated, its SHA-256.
func checkRawBody(a *writeArgs, max int64) error {
	switch {
	case a.Content != nil || a.Encoding != "":
		return fmt.Errorf("write: size (and sha256) describe content sent as the raw request body; content and encoding cannot be given with them")
	case a.Size == nil:
		return fmt.Errorf("write: sha256 describes content sent as the raw request body and goes with its size (the byte count)")
	case *a.Size < 0:
		return fmt.Errorf("write: size is a byte count; got %d", *a.Size)
	case *a.Size > max:
		return fmt.Errorf("write: content is %d bytes, over the write limit of %d bytes (limits.maxWrite)", *a.Size, max)
	}
	if a.SHA256 == "" {
		return nil
	}
	if b, err := hex.DecodeString(a.SHA256); err != nil || len(b) != sha256.Size || strings.ToLower(a.SHA256) != a.SHA256 {
		return fmt.Errorf("write: sha256 must be 64 lowercase hex digits; got %q", a.SHA256)
	}
	return nil
}

// writePrepared is what Prepare keeps in Call.Prepared: a large body is
// decoded once per call, not again by Run and AuditArgs. raw: the content
// is the call's stdin, of size bytes; want is the digest it was stated to
// have (nil: none stated; the gateway computes it on the way).
type writePrepared struct {
	args *writeArgs
	data []byte
	raw  bool
	size int64
	want *[sha256.Size]byte
}

func (t *Write) Prepare(call *gateway.Call, agent gateway.AgentInfo) error {
	a, data, err := t.parse(call.Args, call.Agent)
	if err != nil {
		return err
	}
	if call.Path, err = resolvePath("path", a.Path, agent); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	p := &writePrepared{args: a, data: data}
	if a.Size != nil {
		p.raw, p.size = true, *a.Size
		if a.SHA256 != "" {
			p.want = new([sha256.Size]byte)
			_, _ = hex.Decode(p.want[:], []byte(a.SHA256))
		}
	} else {
		p.size = int64(len(data))
	}
	call.Prepared = p
	return nil
}

func (t *Write) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	ctx, cancel := t.fileDeadline(ctx, call.Agent)
	defer cancel()
	p, ok := call.Prepared.(*writePrepared)
	if !ok || call.Path == "" {
		return nil, errNotPrepared
	}
	if env.Sandbox == nil {
		return nil, errNoSandbox
	}
	content := io.Reader(bytes.NewReader(p.data))
	if p.raw {
		if env.IO == nil || env.IO.Stdin == nil {
			return nil, fmt.Errorf("write: size and sha256 describe content sent as the raw request body (admin API, Content-Type: application/octet-stream); this call has none")
		}
		content = env.IO.Stdin
	}
	defer t.lock(call.Agent, call.Path)()
	sum, err := writeContent(ctx, env.Sandbox, call.Path, content, p)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", call.Path, err)
	}
	hexSum := hex.EncodeToString(sum[:])
	detail := resultDetail(call)
	detail["bytes"], detail["sha256"] = p.size, hexSum
	return &gateway.Result{Output: &WriteOutput{Path: call.Path, Bytes: p.size, SHA256: hexSum}}, nil
}

// writeContent streams when the sandbox can; otherwise it holds the content
// (at most the write limit) and checks it against the stated size and
// digest. It returns the content's SHA-256.
func writeContent(ctx context.Context, sb gateway.Sandbox, path string, r io.Reader, p *writePrepared) ([sha256.Size]byte, error) {
	if sw, ok := sb.(gateway.StreamWriter); ok && p.raw {
		return sw.WriteFileFrom(ctx, path, r, p.size, p.want)
	}
	data := p.data
	if p.raw {
		var err error
		if data, err = io.ReadAll(io.LimitReader(r, p.size+1)); err != nil {
			return [sha256.Size]byte{}, fmt.Errorf("reading the content: %w", err)
		}
	}
	sum := sha256.Sum256(data)
	switch {
	case int64(len(data)) != p.size:
		return sum, fmt.Errorf("the content is not the stated %d bytes; the file was left as it was", p.size)
	case p.want != nil && sum != *p.want:
		return sum, fmt.Errorf("the content is not the stated %d bytes with SHA-256 %x; the file was left as it was", p.size, *p.want)
	}
	return sum, sb.WriteFile(ctx, path, data)
}

// AuditArgs keeps the content's size (decoded, for base64), never the
// content; a raw body's size and SHA-256 are kept as they were stated.
func (*Write) AuditArgs(call *gateway.Call) json.RawMessage {
	if p, ok := call.Prepared.(*writePrepared); ok {
		if p.raw {
			return call.Args // path, size and a stated sha256: small; the digest seen is the result's
		}
		m := map[string]any{"path": p.args.Path, "content": map[string]int{"bytes": len(p.data)}}
		if p.args.Encoding != "" {
			m["encoding"] = p.args.Encoding
		}
		out, _ := json.Marshal(m)
		return out
	}
	raw := call.Args // refused before it was prepared: sized from the JSON
	var enc struct {
		Encoding string `json:"encoding"`
	}
	_ = json.Unmarshal(raw, &enc)
	return auditSized(raw, func(v json.RawMessage) int {
		n := stringSize(v)
		if enc.Encoding == "base64" && len(v) >= 2 && v[0] == '"' {
			body := v[1 : len(v)-1] // base64 needs no JSON escapes
			n = n/4*3 - (len(body) - len(bytes.TrimRight(body, "=")))
		}
		return max(n, 0)
	}, "content")
}
