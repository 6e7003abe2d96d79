package coretools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/internal/gateway"
)

// Write is the `write` core tool: replace a file atomically with the given
// content, creating parent directories, at most MaxWrite bytes.
type Write struct{ *shared }

type writeArgs struct {
	Path     string  `json:"path"`
	Content  *string `json:"content"`
	Encoding string  `json:"encoding"`
}

// WriteOutput is the result body of `write`.
type WriteOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

func (*Write) Name() string       { return "write" }
func (*Write) Kind() gateway.Kind { return gateway.KindCore }

// parse returns the arguments and the bytes to write.
func (t *Write) parse(raw json.RawMessage, agent string) (*writeArgs, []byte, error) {
	var a writeArgs
	if err := decodeArgs("write", raw, &a); err != nil {
		return nil, nil, err
	}
	if a.Content == nil {
		return nil, nil, fmt.Errorf("write: content is required (use \"\" for an empty file)")
	}
	max := t.limitsOf(agent).MaxWrite
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

// writePrepared is what Prepare keeps in Call.Prepared: a large body is
// decoded once per call, not again by Run and AuditArgs.
type writePrepared struct {
	args *writeArgs
	data []byte
}

func (t *Write) Prepare(call *gateway.Call, agent gateway.AgentInfo) error {
	a, data, err := t.parse(call.Args, call.Agent)
	if err != nil {
		return err
	}
	if call.Path, err = resolvePath("path", a.Path, agent); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	call.Prepared = &writePrepared{args: a, data: data}
	return nil
}

func (t *Write) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	ctx, cancel := t.fileDeadline(ctx, call.Agent)
	defer cancel()
	p, ok := call.Prepared.(*writePrepared)
	if !ok || call.Path == "" {
		return nil, errNotPrepared
	}
	data := p.data
	if env.Sandbox == nil {
		return nil, errNoSandbox
	}
	defer t.lock(call.Agent, call.Path)()
	if err := env.Sandbox.WriteFile(ctx, call.Path, data); err != nil {
		return nil, fmt.Errorf("write %s: %w", call.Path, err)
	}
	return &gateway.Result{Output: &WriteOutput{Path: call.Path, Bytes: len(data)}}, nil
}

// AuditArgs keeps the content's size (decoded, for base64), never the content.
func (*Write) AuditArgs(call *gateway.Call) json.RawMessage {
	if p, ok := call.Prepared.(*writePrepared); ok {
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
