package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Limits on what the hook mapping keeps. Policy sees tool_input with strings
// up to PolicyStringLimit (the Command and Path facts are never cut); audit
// details keep strings up to DetailStringLimit, the audit log's default.
const (
	PolicyStringLimit = 256 << 10
	DetailStringLimit = 1024
)

// bodyFields are the keys whose values are file bodies, per Claude Code tool:
// the audit keeps only their size. A tool not listed has no bodies.
var bodyFields = map[string]map[string]bool{
	"Write":        {"content": true},
	"Edit":         {"old_string": true, "new_string": true},
	"MultiEdit":    {"old_string": true, "new_string": true},
	"NotebookEdit": {"new_source": true},
}

// responseBodyFields are the keys of a file tool's tool_response that carry
// file contents (Read returns the file, Write/Edit echo it back).
var responseBodyFields = map[string]bool{
	"content": true, "originalFile": true, "oldString": true, "newString": true,
	"old_string": true, "new_string": true, "new_source": true, "structuredPatch": true,
}

// AuditArgs returns a hook call's arguments as the audit log keeps them: the
// file bodies of Write/Edit/MultiEdit/NotebookEdit become {"bytes": n}.
// Cutting long strings and redacting secrets is the audit writer's generic
// BoundArgs; this is the part only the hook mapping knows.
func AuditArgs(tool string, raw json.RawMessage) json.RawMessage {
	return Bound(raw, bodyFields[tool], 0)
}

// auditBodyFields is every key bodyFields names for any tool. One hook tool
// serves all of Claude Code's tools, MCP tools and ones added after this
// was written, so the audit drops these keys' bodies whichever tool sent
// them; policy still sees them in Call.Args.
var auditBodyFields = func() map[string]bool {
	m := map[string]bool{}
	for _, fields := range bodyFields {
		for k := range fields {
			m[k] = true
		}
	}
	return m
}()

// AuditArgsAnyTool is AuditArgs for arguments whose tool is not known to
// this mapping: every body key of every tool becomes its size.
func AuditArgsAnyTool(raw json.RawMessage) json.RawMessage {
	return Bound(raw, auditBodyFields, 0)
}

// BoundResponse returns a tool_response as the tap records it: file tools'
// bodies become sizes, every other string is cut at DetailStringLimit.
func BoundResponse(tool string, raw json.RawMessage) json.RawMessage {
	var bodies map[string]bool
	if tool == "Read" || bodyFields[tool] != nil {
		bodies = responseBodyFields
	}
	return Bound(raw, bodies, DetailStringLimit)
}

// Bound rewrites raw JSON: values under a body key become their byte size,
// strings longer than limit (when > 0) are cut with a marker. Input that is
// not JSON is replaced by its size, so nothing unparsed reaches the audit.
func Bound(raw json.RawMessage, bodies map[string]bool, limit int) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return sizeOf(len(raw))
	}
	v, changed := walk(v, bodies, limit)
	if !changed {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			return buf.Bytes()
		}
	}
	return marshal(v)
}

func walk(v any, bodies map[string]bool, limit int) (any, bool) {
	switch t := v.(type) {
	case string:
		if limit > 0 && len(t) > limit {
			return cut(t, limit), true
		}
	case []any:
		changed := false
		for i, e := range t {
			var c bool
			t[i], c = walk(e, bodies, limit)
			changed = changed || c
		}
		return t, changed
	case map[string]any:
		changed := false
		for k, e := range t {
			if bodies[k] && e != nil {
				t[k] = map[string]int{"bytes": bodySize(e)}
				changed = true
				continue
			}
			var c bool
			t[k], c = walk(e, bodies, limit)
			changed = changed || c
		}
		return t, changed
	}
	return v, false
}

// bodySize is a string's length in bytes, or the JSON size of anything else.
func bodySize(v any) int {
	if s, ok := v.(string); ok {
		return len(s)
	}
	return len(marshal(v))
}

// cut shortens s to at most limit bytes on a rune boundary and says so.
func cut(s string, limit int) string {
	n := limit
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s…[truncated, %d bytes total]", s[:n], len(s))
}

// CutString is s, or when longer than limit bytes, cut with a marker.
func CutString(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return cut(s, limit)
}

func sizeOf(n int) json.RawMessage { return marshal(map[string]int{"bytes": n}) }

// marshal encodes without HTML escaping (audit lines are read by people) and
// without the encoder's trailing newline.
func marshal(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return sizeOf(0)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
