package hookcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/proto/hooks"
)

const samples = "../../proto/hooks/testdata/claude-code-samples"

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(samples, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSamples walks the whole captured-samples folder: every file is either
// input toolgate reads (and must parse and map) or a record of what the CLI
// itself sent, named here so a new sample cannot be silently ignored.
func TestSamples(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(samples)
	if err != nil {
		t.Fatal(err)
	}
	cliRecords := map[string]bool{"api-request-envelope.json": true, "hook-env-PreToolUse.json": true}
	for _, e := range entries {
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			data := readSample(t, name)
			switch {
			case strings.HasPrefix(name, "hook-input-"):
				in, err := hooks.ParseInput(bytes.NewReader(data), 0)
				if err != nil {
					t.Fatalf("ParseInput: %v", err)
				}
				want := strings.TrimSuffix(strings.TrimPrefix(name, "hook-input-"), ".json")
				if !strings.HasPrefix(want, in.HookEventName) {
					t.Fatalf("event %q, file says %q", in.HookEventName, want)
				}
				if in.SessionID == "" || in.Cwd == "" {
					t.Fatalf("session/cwd not read: %+v", in)
				}
				call, err := ToCall(in, "/workspace")
				if !in.IsToolEvent() {
					if !errors.Is(err, ErrNoToolCall) {
						t.Fatalf("ToCall on %s: %v", in.HookEventName, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("ToCall: %v", err)
				}
				if call.Tool != in.ToolName || call.Kind != "hook" || call.Session != in.SessionID || call.Detail["hook_event_name"] != in.HookEventName {
					t.Fatalf("call %+v does not reflect input", call)
				}
				if in.ToolName == "Bash" && call.Command == "" {
					t.Fatal("Bash call without Command")
				}
			case strings.HasPrefix(name, "stream-json-"):
				n := 0
				if err := ReadStreamJSON(bytes.NewReader(data), func(Observation) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					t.Fatal("no observations")
				}
			case strings.HasPrefix(name, "api-followup-"), cliRecords[name]:
				// What the CLI sent the API or the hook's environment: nothing
				// toolgate parses. Still JSON, so the sample set stays sane.
				if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
					t.Fatal("not a JSON object")
				}
			default:
				t.Fatalf("unclassified sample %s: decide what toolgate does with it", name)
			}
		})
	}
}

func FuzzParseInput(f *testing.F) {
	entries, _ := os.ReadDir(samples)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "hook-input-") {
			f.Add(readSample(f, e.Name()))
		}
	}
	f.Add([]byte(`{"hook_event_name":"PreToolUse","tool_name":"Read","tool_use_id":"t","tool_input":{"file_path":"../../etc/passwd"}}`))
	f.Add([]byte(`{"hook_event_name":"PreToolUse","tool_name":"mcp__a__b__c","tool_use_id":"t","tool_input":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := hooks.ParseInput(bytes.NewReader(data), 1<<20)
		if err != nil {
			return
		}
		if in.HookEventName == "" || in.IsToolEvent() && (in.ToolName == "" || in.ToolInput[0] != '{') {
			t.Fatalf("accepted input without what it needs: %+v", in)
		}
		call, err := ToCall(in, "/workspace")
		if err != nil {
			return
		}
		if call.Path != "" && (!strings.HasPrefix(call.Path, "/") || strings.Contains(call.Path, "/../")) {
			t.Fatalf("path not normalised: %q", call.Path)
		}
		if len(call.Args) > 0 && !json.Valid(call.Args) {
			t.Fatalf("args not JSON: %s", call.Args)
		}
	})
}
