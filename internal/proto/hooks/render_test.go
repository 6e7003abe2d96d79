package hooks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolgate/toolgate/internal/proto"
)

// TestRenderMatchesReference checks the deny against the stdout the real CLI
// accepted (captured hook_response in the include-hook-events sample) and
// both answers against reference §8 byte for byte.
func TestRenderMatchesReference(t *testing.T) {
	var captured string
	sc := bufio.NewScanner(bytes.NewReader(readSample(t, "stream-json-include-hook-events.jsonl")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Subtype   string `json:"subtype"`
			HookEvent string `json:"hook_event"`
			Stdout    string `json:"stdout"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Subtype == "hook_response" && ev.HookEvent == "PreToolUse" {
			captured = ev.Stdout
		}
	}
	if captured == "" {
		t.Fatal("no captured PreToolUse hook_response in sample")
	}
	if got := string(RenderPreToolUse(proto.GateAnswer{Rule: "rules[0]", Reason: "GATE-DENY: json deny reason"})); got != captured {
		t.Fatalf("deny:\n got %q\nwant %q", got, captured)
	}

	tests := []struct {
		name string
		dec  proto.GateAnswer
		want string
	}{
		{"allow", proto.GateAnswer{Allow: true, Rule: "default"},
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}` + "\n"},
		{"allow with reason", proto.GateAnswer{Allow: true, Reason: "ok by rule"},
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"ok by rule"}}` + "\n"},
		{"deny", proto.GateAnswer{Rule: "rules[2]", Reason: "no rm -rf"},
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no rm -rf"}}` + "\n"},
		{"deny without reason", proto.GateAnswer{Rule: "tools.allowlist"},
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"denied by toolgate policy (tools.allowlist)"}}` + "\n"},
		{"html and quotes stay readable", proto.GateAnswer{Reason: `"<x>" & y`},
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"\"<x>\" & y"}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RenderPreToolUse(tt.dec)
			if string(got) != tt.want {
				t.Fatalf("\n got %s\nwant %s", got, tt.want)
			}
			// Exactly one JSON object on stdout, nothing else (reference §4).
			dec := json.NewDecoder(bytes.NewReader(got))
			var v map[string]any
			if err := dec.Decode(&v); err != nil || dec.More() || len(v) != 1 {
				t.Fatalf("not exactly one object: %v %v", err, v)
			}
		})
	}
}

func TestReplyExit2(t *testing.T) {
	deny := ReplyPreToolUse(proto.GateAnswer{Reason: "GATE-DENY: policy forbids this command (exit2)"}, true)
	if deny.ExitCode != 2 || len(deny.Stdout) != 0 || string(deny.Stderr) != "GATE-DENY: policy forbids this command (exit2)\n" {
		t.Fatalf("exit2 deny: %+v", deny)
	}
	allow := ReplyPreToolUse(proto.GateAnswer{Allow: true}, true)
	if allow.ExitCode != 0 || len(allow.Stderr) != 0 || !bytes.Contains(allow.Stdout, []byte(`"permissionDecision":"allow"`)) {
		t.Fatalf("exit2-style allow must still be explicit JSON: %+v", allow)
	}
	jsonDeny := ReplyPreToolUse(proto.GateAnswer{Reason: "r"}, false)
	if jsonDeny.ExitCode != 0 || string(jsonDeny.Stdout) != string(RenderPreToolUse(proto.GateAnswer{Reason: "r"})) {
		t.Fatalf("json deny: %+v", jsonDeny)
	}
}

func TestDenyInternal(t *testing.T) {
	for _, err := range []error{errors.New("dial unix /run/toolgate/gateway.sock: connect: no such file"), nil} {
		dec := DenyInternal(err)
		if dec.Allow || dec.Rule != "hook.internal" || dec.Reason == "" {
			t.Fatalf("%+v", dec)
		}
		out := RenderPreToolUse(dec)
		if !bytes.Contains(out, []byte(`"permissionDecision":"deny"`)) || !bytes.Contains(out, []byte("failed closed")) {
			t.Fatalf("%s", out)
		}
	}
}
