// Package coretools implements the four core tools — read, write, patch and
// exec — as gateway.Tool values that act only through a gateway.Sandbox.
//
// Argument schemas (also exported as JSON Schema strings in schema.go):
//
//	read  {path, offset?, limit?, encoding?}
//	      offset: first line, 1-based; limit: number of lines; encoding: "utf-8" (default) | "base64"
//	      → {path, content, lines:{from,to,total}, size, truncated, encoding?}
//	write {path, content, encoding?}                    → {path, bytes}
//	patch {path, old, new} | {path, diff}               → {path, bytes, replacements | hunks}
//	exec  {command | argv, cwd?, env?, secretEnv?, stdin?, timeout?} → {exitCode, stdout, stderr, timedOut, truncated}
//	      secretEnv {NAME: secret}: host secrets put in the environment, for
//	      the operator's calls only (admin API); the audit keeps the names
//
// Prepare validates arguments strictly (unknown fields, wrong types and
// invalid UTF-8 are errors) and fills the facts policy decides on: Path is
// the normalised absolute path as the sandbox sees it (relative paths are
// relative to the agent's workspace, ".." is resolved lexically); for exec,
// Argv is the full argv (["/bin/sh","-c",command] for a command), Command the
// command string and Path the working directory. Run acts on exactly those
// facts, so what policy saw is what runs.
package coretools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"path"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
)

// LimitsFunc returns the limits of the named agent. It is consulted on every
// call, so a configuration reload takes effect for the next call.
type LimitsFunc func(agent string) config.Limits

// Secrets resolves a host secret for a call of tool by agent
// (*secrets.Store); exec uses it for the operator's secretEnv.
type Secrets interface {
	Resolve(agent, tool, name string) (string, error)
}

// New returns the four core tools: read, write, patch, exec. secrets may be
// nil: then no exec can have a secret in its environment.
func New(limits LimitsFunc, secrets Secrets) []gateway.Tool {
	s := &shared{limits: limits, secrets: secrets}
	return []gateway.Tool{&Read{s}, &Write{s}, &Patch{s}, &Exec{s}}
}

// shared is what the four tools of one New have in common.
type shared struct {
	limits  LimitsFunc
	secrets Secrets
	// locks serialise write and patch on the same file of the same agent, so
	// two patches through the gateway never lose each other's change.
	locks [64]sync.Mutex
}

// fileDeadline bounds a file tool's work in the sandbox by the agent's exec
// timeout: a sandbox that stops answering mid-read holds the call no longer
// than it could hold an exec.
func (s *shared) fileDeadline(ctx context.Context, agent string) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.limitsOf(agent).ExecTimeout)
}

// limitsOf is the agent's limits, config's defaults for any left at zero
// (a loaded config never does; a bare LimitsFunc in a test may).
func (s *shared) limitsOf(agent string) config.Limits {
	var l config.Limits
	if s.limits != nil {
		l = s.limits(agent)
	}
	if l.ExecTimeout <= 0 {
		l.ExecTimeout = config.DefaultExecTimeout
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = config.DefaultMaxOutput
	}
	if l.MaxReadFile <= 0 {
		l.MaxReadFile = config.DefaultMaxReadFile
	}
	if l.MaxWrite <= 0 {
		l.MaxWrite = config.DefaultMaxWrite
	}
	return l
}

func (s *shared) lock(agent, p string) func() {
	h := fnv.New32a()
	_, _ = io.WriteString(h, agent+"\x00"+p)
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

var (
	errNotPrepared = errors.New("internal error: call was not prepared")
	errNoSandbox   = errors.New("no sandbox for this agent")
)

// resolvePath normalises a path as the sandbox sees it: relative to the
// workspace, ".." resolved lexically (it can climb out of the workspace; the
// result is visible to policy and means the container's path, never the
// host's).
func resolvePath(field, p string, agent gateway.AgentInfo) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s is required", field)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%s contains a NUL byte", field)
	}
	if !path.IsAbs(p) {
		ws := agent.Workspace
		if ws == "" {
			ws = proto.WorkspacePath
		}
		p = path.Join(ws, p)
	}
	return path.Clean(p), nil
}

// decodeArgs decodes a tool's JSON arguments into v strictly: one object,
// valid UTF-8, no unknown fields, no trailing data, types as declared.
func decodeArgs(tool string, raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return fmt.Errorf("%s: arguments are required (a JSON object)", tool)
	}
	if !utf8.Valid(raw) {
		// encoding/json would silently replace the bad bytes with U+FFFD.
		return fmt.Errorf("%s: arguments contain invalid UTF-8 (send binary content base64-encoded with \"encoding\":\"base64\")", tool)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %s", tool, describeDecodeError(err, v))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: unexpected data after the arguments object", tool)
	}
	return nil
}

func describeDecodeError(err error, v any) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("arguments must be a JSON object, got %s", te.Value)
		}
		return fmt.Sprintf("%s: want %s, got %s", te.Field, typeName(te.Type), te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("arguments are not valid JSON: %v", se)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "arguments are not valid JSON: unexpected end"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for this one.
		return fmt.Sprintf("%s (allowed: %s)", strings.TrimPrefix(err.Error(), "json: "), strings.Join(fieldNames(v), ", "))
	default:
		return strings.TrimPrefix(err.Error(), "json: ")
	}
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Slice:
		return "an array of strings"
	case reflect.Map:
		return "an object of strings"
	case reflect.Pointer:
		return typeName(t.Elem())
	}
	return t.String()
}

func fieldNames(v any) []string {
	t := reflect.TypeOf(v).Elem()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// isNull reports whether an optional raw field is absent.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// auditSized replaces the named body fields of an arguments object with
// {"bytes":N}, so the audit log keeps their size, never their content.
func auditSized(raw json.RawMessage, size func(v json.RawMessage) int, fields ...string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	for _, f := range fields {
		v, ok := m[f]
		if !ok {
			continue
		}
		m[f], _ = json.Marshal(map[string]int{"bytes": size(v)})
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// stringSize is the byte length of a JSON string value, or of the raw value
// when it is not a string (a bad request still never logs its body).
func stringSize(v json.RawMessage) int {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return len(v)
	}
	return len(s)
}
