package agentloop

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/lib/textsafe"
)

// A scripted session says so at the top; with a provider's key set in the
// caller's shell, it says why that key did not make it a real model.
func TestTranscriptScriptedNote(t *testing.T) {
	for _, c := range []struct {
		keys      []string
		want, not string
	}{
		{nil, "Set ANTHROPIC_API_KEY or OPENAI_API_KEY (see docs/agents.md) for a real model.", "is set in this shell"},
		{[]string{"ANTHROPIC_API_KEY"}, "ANTHROPIC_API_KEY is set in this shell, but keys are read by the gateway", "Set ANTHROPIC_API_KEY or"},
		{[]string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}, "ANTHROPIC_API_KEY and OPENAI_API_KEY are set in this shell", ""},
	} {
		var out strings.Builder
		tr := &Transcript{W: &out, Agent: "demo", KeysHere: c.keys}
		tr.Event(Event{Type: "session", Session: "S", Agent: "demo", Model: "scripted", Provider: "scripted", Scripted: true})
		got := out.String()
		if !strings.Contains(got, "NOTE: this model is SCRIPTED") || !strings.Contains(got, c.want) || (c.not != "" && strings.Contains(got, c.not)) {
			t.Errorf("keys %v:\n%s", c.keys, got)
		}
		if len(c.keys) > 0 && !strings.Contains(got, `agent demo has no real provider with a key: docs/agents.md, "Which model"`) {
			t.Errorf("keys %v: no pointer to the fix:\n%s", c.keys, got)
		}
	}
	var out strings.Builder
	(&Transcript{W: &out, KeysHere: []string{"OPENAI_API_KEY"}}).Event(Event{Type: "session", Agent: "demo", Model: "gpt-4.1", Provider: "openai"})
	if strings.Contains(out.String(), "SCRIPTED") || strings.Contains(out.String(), "set in this shell") {
		t.Errorf("a real model's session: %s", out.String())
	}
}

// TestTranscriptHostile: what the model says, the calls it makes and what
// they print reach the terminal as visible text: no escape sequence, no
// carriage return, no bidirectional override; a call is one line; nothing
// the model or a command writes starts at a column only the transcript
// writes at (a call's "→" at the second, its result at the fourth).
func TestTranscriptHostile(t *testing.T) {
	const h = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\rok \u202eevil\u202c\u009b\xff\n  → exec harmless\n    ✓ allowed · exit 0"
	var out strings.Builder
	tr := &Transcript{W: &out, Agent: "demo"}
	for _, e := range []Event{
		{Type: "session", Session: "S", Agent: "demo", Model: "m\x1b[31m", Provider: "p"},
		{Type: "text", Text: h[:9]}, {Type: "text", Text: h[9:]}, // the model's words arrive in pieces
		{Type: "call", Tool: "exec\x1b[2J", Args: []byte(`{"command":"` + "rm -rf /\\n  → read x\\u202e" + `"}`)},
		{Type: "result", Decision: "deny", Rule: "r\rx", Reason: "no\n    ✓ allowed"},
		{Type: "call", Tool: "exec", Args: []byte(`{"argv":["printf","x"]}`)},
		{Type: "result", Decision: "allow", Output: `{"output":{"stdout":"` + "line 1\\n    ✗ denied by nothing\\n\\u001b]0;title\\u0007\\tx\\n" + `"}}`},
		{Type: "stop", Stop: StopDone, Error: "e\x1b[2J\nforged"},
	} {
		tr.Event(e)
	}
	got := out.String()
	for _, r := range got {
		if textsafe.Unsafe(r) {
			t.Fatalf("%U reached the terminal:\n%s", r, got)
		}
	}
	var calls, results int
	for _, l := range strings.Split(got, "\n") {
		switch {
		case strings.HasPrefix(l, "  → "):
			calls++
		case strings.HasPrefix(l, "    ✓ ") || strings.HasPrefix(l, "    ✗ "):
			results++
		}
	}
	if calls != 2 || results != 2 {
		t.Errorf("%d call lines and %d result lines, want 2 and 2:\n%s", calls, results, got)
	}
	for _, want := range []string{`\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\rok \u202eevil\u202c\u009b\xff`, "\n         → exec harmless\n",
		`  → exec\x1b[2J rm -rf /\n  → read x\u202e`, "      │ \\x1b]0;title\\x07\tx\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the transcript does not show %q:\n%s", want, got)
		}
	}
}
