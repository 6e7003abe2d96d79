package hooks

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const samples = "testdata/claude-code-samples"

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(samples, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseInputBad(t *testing.T) {
	pre := func(ti string) string {
		return `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t","tool_input":` + ti + `}`
	}
	huge := `{"hook_event_name":"PreToolUse","tool_name":"Write","tool_use_id":"t","tool_input":{"file_path":"/a","content":"` +
		strings.Repeat("x", 20<<20) + `"}}`
	tests := []struct {
		name, in string
		want     error
	}{
		{"empty", "", ErrEmpty},
		{"whitespace", " \n\t", ErrEmpty},
		{"not json", "hello", ErrNotJSON},
		{"truncated", `{"hook_event_name":"PreToolUse"`, ErrNotJSON},
		{"array", `[1,2]`, ErrNotJSON},
		{"two objects", `{"hook_event_name":"Stop"}{}`, ErrNotJSON},
		{"20 MiB", huge, ErrTooLarge},
		{"no event", `{"tool_name":"Bash","tool_input":{}}`, ErrMissingField},
		{"unknown event", `{"hook_event_name":"PreToolUze","tool_name":"Bash","tool_input":{}}`, ErrUnknownEvent},
		{"event not a string", `{"hook_event_name":7}`, ErrWrongType},
		{"missing tool_name", `{"hook_event_name":"PreToolUse","tool_use_id":"t","tool_input":{}}`, ErrMissingField},
		{"tool_name not a string", `{"hook_event_name":"PreToolUse","tool_name":["Bash"],"tool_use_id":"t","tool_input":{}}`, ErrWrongType},
		{"missing tool_input", `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t"}`, ErrMissingField},
		{"tool_input string", pre(`"echo hi"`), ErrWrongType},
		{"tool_input array", pre(`["echo"]`), ErrWrongType},
		{"tool_input null", pre(`null`), ErrWrongType},
		{"missing tool_use_id", `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{}}`, ErrMissingField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseInput(strings.NewReader(tt.in), 0)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseInputLimit(t *testing.T) {
	in := readSample(t, "hook-input-PreToolUse-Bash.json")
	if _, err := ParseInput(bytes.NewReader(in), int64(len(in))); err != nil {
		t.Fatalf("exactly max bytes: %v", err)
	}
	if _, err := ParseInput(bytes.NewReader(in), int64(len(in))-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte over: %v", err)
	}
}

func TestEventIDStable(t *testing.T) {
	in, err := ParseInput(bytes.NewReader(readSample(t, "hook-input-PostToolUse-Bash.json")), 0)
	if err != nil {
		t.Fatal(err)
	}
	a := EventID(in)
	in2 := *in
	in2.HookEventName = EventPreToolUse
	if a != EventID(in) || a == EventID(&in2) || !validID(a) {
		t.Fatalf("ids: %s %s", a, EventID(&in2))
	}
}
