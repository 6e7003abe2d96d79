package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// ClientName is the in-sandbox client's file name; a settings entry running
// it with "hook" as first argument is toolgate's own and is replaced on re-apply.
const ClientName = "toolgate-client"

// Defaults for GateCommand's zero fields.
const (
	DefaultGateTimeout = 30 // seconds; the gate answers well inside it
	// MaxAskWait bounds how long the gateway holds a Claude Code hook call
	// that a rule sends to a person, so the answer lands inside the gate's
	// deadline and the hook's timeout.
	MaxAskWait        = 20 * time.Second
	DefaultTapTimeout = 30
)

// ErrInvalidSettings means the existing settings document cannot be merged
// into; MergeSettings then produces nothing.
var ErrInvalidSettings = errors.New("existing settings document is invalid")

// GateCommand is how the sandbox runs the hook programs.
type GateCommand struct {
	// Command is the absolute path of toolgate-client inside the sandbox. It
	// must be absolute: the CLI resolves relative ones against the project dir.
	Command    string
	GateArgs   []string // default: hook pre-tool-use
	TapArgs    []string // default: hook post-tool-use
	Timeout    int      // gate timeout in seconds; default DefaultGateTimeout
	TapTimeout int      // default DefaultTapTimeout
}

// handler is a command hook in exec form (no shell between the CLI and us).
type handler struct {
	Type      string   `json:"type"`
	Command   string   `json:"command"`
	Args      []string `json:"args"`
	Timeout   int      `json:"timeout"`
	OnFailure string   `json:"onFailure,omitempty"`
}

type matcherGroup struct {
	Matcher string    `json:"matcher"`
	Hooks   []handler `json:"hooks"`
}

// MergeSettings is the one writer of the Claude Code settings document. It
// registers the gate on PreToolUse (matcher "*", onFailure "block" so a
// crashed or slow gate blocks instead of failing open, a timeout) and the tap
// on PostToolUse and PostToolUseFailure (a failing Bash command fires only the
// latter). Everything else in existing is kept in its order: other settings,
// other events' hooks, the user's own PreToolUse hooks. Earlier toolgate
// entries are replaced, so applying it twice gives the same bytes. Invalid
// existing JSON, or a document that disables all hooks, is an error and
// nothing is produced.
func MergeSettings(existing []byte, gate GateCommand) ([]byte, error) {
	return mergeSettings(existing, gate, false)
}

// Where Claude Code reads its managed (policy) settings on Linux. No other
// settings source can disable or override the hooks registered there.
const (
	ManagedSettingsDir  = "/etc/claude-code"
	ManagedSettingsFile = "managed-settings.json"
)

// ManagedSettings is MergeSettings for the managed settings file, with
// allowManagedHooksOnly set: measured with Claude Code 2.1.328, a hook from
// any other source (the workspace's .claude/settings*.json, ~/.claude, a
// --settings the agent passes) otherwise runs beside the gate and its
// "allow" with updatedInput runs a command the gate never saw. A
// disableAllHooks in those sources does not disable managed hooks, nor do
// --bare and --safe-mode.
func ManagedSettings(existing []byte, gate GateCommand) ([]byte, error) {
	return mergeSettings(existing, gate, true)
}

func mergeSettings(existing []byte, gate GateCommand, managed bool) ([]byte, error) {
	if !path.IsAbs(gate.Command) {
		return nil, fmt.Errorf("gate command %q must be an absolute path", gate.Command)
	}
	gateArgs := orDefault(gate.GateArgs, []string{"hook", "pre-tool-use"})
	tapArgs := orDefault(gate.TapArgs, []string{"hook", "post-tool-use"})
	gateTimeout := orDefaultInt(gate.Timeout, DefaultGateTimeout)
	tapTimeout := orDefaultInt(gate.TapTimeout, DefaultTapTimeout)

	if len(bytes.TrimSpace(existing)) == 0 {
		existing = []byte("{}")
	}
	doc, err := parseObject(existing)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSettings, err)
	}
	if raw := doc.get("disableAllHooks"); raw != nil && string(bytes.TrimSpace(raw)) != "false" {
		return nil, fmt.Errorf("%w: disableAllHooks is set, the gate would never run", ErrInvalidSettings)
	}
	hooks := object{}
	if raw := doc.get("hooks"); raw != nil {
		if hooks, err = parseObject(raw); err != nil {
			return nil, fmt.Errorf("%w: hooks: %v", ErrInvalidSettings, err)
		}
	}
	gateGroup := matcherGroup{Matcher: "*", Hooks: []handler{{
		Type: "command", Command: gate.Command, Args: gateArgs, Timeout: gateTimeout, OnFailure: "block",
	}}}
	// The tap keeps the default onFailure: it cannot block anything, and a
	// blocking failure after the tool ran would only talk to the model.
	tapGroup := matcherGroup{Matcher: "*", Hooks: []handler{{
		Type: "command", Command: gate.Command, Args: tapArgs, Timeout: tapTimeout,
	}}}
	for _, reg := range []struct {
		event string
		group matcherGroup
	}{
		{EventPreToolUse, gateGroup},
		{EventPostToolUse, tapGroup},
		{EventPostToolUseFailure, tapGroup},
	} {
		groups, err := withoutOurs(hooks.get(reg.event), gate.Command)
		if err != nil {
			return nil, fmt.Errorf("%w: hooks.%s: %v", ErrInvalidSettings, reg.event, err)
		}
		hooks.set(reg.event, marshal(append(groups, marshal(reg.group))))
	}
	doc.set("hooks", hooks.marshal())
	if managed {
		doc.set("allowManagedHooksOnly", json.RawMessage("true"))
	}

	var compact, out bytes.Buffer
	if err := json.Compact(&compact, doc.marshal()); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSettings, err)
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSettings, err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// withoutOurs returns an event's matcher groups with toolgate's handlers
// removed; a group left with no handlers is dropped, others are kept as written.
func withoutOurs(raw json.RawMessage, command string) ([]json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	var groups []json.RawMessage
	if err := json.Unmarshal(raw, &groups); err != nil {
		return nil, errors.New("not an array of matcher groups")
	}
	kept := groups[:0]
	for i, g := range groups {
		obj, err := parseObject(g)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %v", i, err)
		}
		hraw := obj.get("hooks")
		if hraw == nil {
			kept = append(kept, g)
			continue
		}
		var hs []json.RawMessage
		if err := json.Unmarshal(hraw, &hs); err != nil {
			return nil, fmt.Errorf("[%d].hooks: not an array", i)
		}
		var theirs []json.RawMessage
		for _, h := range hs {
			if !isOurs(h, command) {
				theirs = append(theirs, h)
			}
		}
		switch {
		case len(theirs) == len(hs):
			kept = append(kept, g)
		case len(theirs) > 0:
			obj.set("hooks", marshal(theirs))
			kept = append(kept, obj.marshal())
		}
	}
	return kept, nil
}

// isOurs recognises a handler this writer produced: the client (at this or
// any other path) run with "hook" first, in exec or shell form.
func isOurs(raw json.RawMessage, command string) bool {
	var h struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	if json.Unmarshal(raw, &h) != nil || h.Type != "command" {
		return false
	}
	argv := append(strings.Fields(h.Command), h.Args...)
	if len(argv) < 2 || argv[1] != "hook" {
		return false
	}
	return argv[0] == command || path.Base(argv[0]) == ClientName
}

func orDefault(v, d []string) []string {
	if len(v) == 0 {
		return d
	}
	return v
}

func orDefaultInt(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// object is a JSON object that keeps its members' order, so a merged
// settings document reads like the one the user wrote.
type object []member

type member struct {
	key string
	val json.RawMessage
}

// parseObject reads exactly one JSON object. Duplicate keys are refused:
// which one the CLI would honour is not ours to guess.
func parseObject(data []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	} else if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var o object
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not valid JSON: %v", err)
		}
		key := tok.(string) // object keys are always strings
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("not valid JSON: %v", err)
		}
		o = append(o, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the object")
	}
	return o, nil
}

func (o object) get(key string) json.RawMessage {
	for _, m := range o {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

func (o *object) set(key string, val json.RawMessage) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].val = val
			return
		}
	}
	*o = append(*o, member{key, val})
}

func (o object) marshal() json.RawMessage {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(marshal(m.key))
		buf.WriteByte(':')
		buf.Write(m.val)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}
