package agentloop

import (
	"strings"
	"testing"
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
