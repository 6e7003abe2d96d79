package hookcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/proto/hooks"
)

func mustParse(t *testing.T, s string) *hooks.Input {
	t.Helper()
	in, err := hooks.ParseInput(strings.NewReader(s), 0)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func preInput(tool, toolInput, cwd string) string {
	return `{"session_id":"sess","cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"` + tool +
		`","tool_use_id":"toolu_1","tool_input":` + toolInput + `}`
}

func TestToCallSamples(t *testing.T) {
	t.Parallel()
	in := mustParse(t, string(readSample(t, "hook-input-PreToolUse-Bash.json")))
	call, err := ToCall(in, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if call.Kind != "hook" || call.Via != ViaHook || call.Tool != "Bash" || call.Session != "9d220c79-ef6c-4c6b-9633-236ff6d73ebd" {
		t.Fatalf("identity: %+v", call)
	}
	if call.Command != "echo hello > /tmp/x.txt" || !reflect.DeepEqual(call.Argv, []string{"/bin/sh", "-c", "echo hello > /tmp/x.txt"}) {
		t.Fatalf("facts: %q %q", call.Command, call.Argv)
	}
	if call.Detail["tool_use_id"] != "toolu_01FAKEGATETEST0000000001" || call.Detail["hook_event_name"] != "PreToolUse" || call.Detail["event_id"] != hooks.EventID(in) {
		t.Fatalf("detail: %v", call.Detail)
	}
	if m := call.ArgsMap(); m["description"] != "Write hello to a file" {
		t.Fatalf("args: %s", call.Args)
	}

	mcp, err := ToCall(mustParse(t, string(readSample(t, "hook-input-PreToolUse-mcp.json"))), "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if mcp.Tool != "mcp__harness__touch_marker" || mcp.Detail["mcp_server"] != "harness" || mcp.Detail["mcp_tool"] != "touch_marker" || mcp.Path != "" {
		t.Fatalf("mcp: %+v", mcp)
	}

	post, err := ToCall(mustParse(t, string(readSample(t, "hook-input-PostToolUse-Bash-with-output.json"))), "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := post.Detail["tool_response"].(json.RawMessage)
	if !bytes.Contains(resp, []byte(`"stdout":"out-line\nerr-line"`)) || post.Detail["duration_ms"] != 105.0 {
		t.Fatalf("post detail: %v %s", post.Detail, resp)
	}

	fail, err := ToCall(mustParse(t, string(readSample(t, "hook-input-PostToolUseFailure-Bash.json"))), "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if fail.Detail["error"] != "Exit code 3\nfail-out" || fail.Detail["is_interrupt"] != false || fail.Command != "echo fail-out; exit 3" {
		t.Fatalf("failure detail: %v", fail.Detail)
	}
}

func TestToCallPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool, input, cwd, want string
	}{
		{"Read", `{"file_path":"/w/a/../b.txt"}`, "/w", "/w/b.txt"},
		{"Read", `{"file_path":"src/x.go"}`, "/w/proj", "/w/proj/src/x.go"},
		{"Write", `{"file_path":"../../etc/passwd","content":"x"}`, "/w/proj", "/etc/passwd"},
		{"Write", `{"file_path":"../../../../etc/passwd","content":"x"}`, "/w", "/etc/passwd"},
		{"Edit", `{"file_path":"a.txt","old_string":"a","new_string":"b"}`, "", "/workspace/a.txt"},
		{"MultiEdit", `{"file_path":"/w//m.txt","edits":[]}`, "/w", "/w/m.txt"},
		{"NotebookEdit", `{"notebook_path":"nb.ipynb","new_source":"print(1)"}`, "/w", "/w/nb.ipynb"},
		{"Grep", `{"pattern":"x"}`, "/w", "/w"},
		{"Glob", `{"pattern":"*.go","path":"sub/./dir"}`, "/w", "/w/sub/dir"},
	}
	for _, tt := range tests {
		t.Run(tt.tool+tt.input, func(t *testing.T) {
			call, err := ToCall(mustParse(t, preInput(tt.tool, tt.input, tt.cwd)), "/workspace")
			if err != nil {
				t.Fatal(err)
			}
			if call.Path != tt.want {
				t.Fatalf("path %q, want %q", call.Path, tt.want)
			}
		})
	}
}

func TestToCallBad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tool, input, workspace string
		want                         error
	}{
		{"bash no command", "Bash", `{"description":"x"}`, "/w", hooks.ErrMissingField},
		{"bash command number", "Bash", `{"command":42}`, "/w", hooks.ErrWrongType},
		{"bash command empty", "Bash", `{"command":""}`, "/w", hooks.ErrMissingField},
		{"write no path", "Write", `{"content":"x"}`, "/w", hooks.ErrMissingField},
		{"write path object", "Write", `{"file_path":{"p":1},"content":"x"}`, "/w", hooks.ErrWrongType},
		{"relative path without base", "Read", `{"file_path":"a"}`, "", hooks.ErrMissingField},
		{"home-relative path", "Read", `{"file_path":"~/.ssh/id_rsa"}`, "/w", hooks.ErrWrongType},
		{"home directory", "Grep", `{"pattern":"x","path":"~"}`, "/w", hooks.ErrWrongType},
		{"mcp without tool", "mcp__server", `{}`, "/w", hooks.ErrWrongType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ToCall(mustParse(t, preInput(tt.tool, tt.input, "")), tt.workspace)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := ToCall(mustParse(t, string(readSample(t, "hook-input-Stop.json"))), "/w"); !errors.Is(err, ErrNoToolCall) {
		t.Fatalf("Stop: %v", err)
	}
}

func TestToCallMCPServerWithUnderscores(t *testing.T) {
	t.Parallel()
	in := mustParse(t, `{"hook_event_name":"PreToolUse","tool_name":"mcp__my__srv__do_it","tool_use_id":"t","tool_input":{},"mcp_server":{"name":"my__srv"}}`)
	call, err := ToCall(in, "/w")
	if err != nil {
		t.Fatal(err)
	}
	if call.Detail["mcp_server"] != "my__srv" || call.Detail["mcp_tool"] != "do_it" {
		t.Fatalf("detail %v", call.Detail)
	}
}

func TestToCallBoundsArgs(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", hooks.PolicyStringLimit) // 2 bytes each: cut mid-rune must not happen
	in := mustParse(t, preInput("Bash", `{"command":"`+long+`"}`, "/w"))
	call, err := ToCall(in, "/w")
	if err != nil {
		t.Fatal(err)
	}
	if call.Command != long {
		t.Fatal("Command fact was cut")
	}
	got, _ := call.ArgsMap()["command"].(string)
	if len(got) > hooks.PolicyStringLimit+64 || !strings.Contains(got, "…[truncated, ") || !json.Valid(call.Args) {
		t.Fatalf("args not bounded: %d bytes", len(got))
	}
	if !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Fatal("cut broke a rune")
	}
}

func TestAuditArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool, in, want string
	}{
		{"Write", `{"file_path":"/a","content":"hello"}`, `{"content":{"bytes":5},"file_path":"/a"}`},
		{"Edit", `{"file_path":"/a","old_string":"ab","new_string":"abc","replace_all":false}`,
			`{"file_path":"/a","new_string":{"bytes":3},"old_string":{"bytes":2},"replace_all":false}`},
		{"MultiEdit", `{"file_path":"/a","edits":[{"old_string":"x","new_string":"yy"}]}`,
			`{"edits":[{"new_string":{"bytes":2},"old_string":{"bytes":1}}],"file_path":"/a"}`},
		{"NotebookEdit", `{"notebook_path":"/n","new_source":"abcd"}`, `{"new_source":{"bytes":4},"notebook_path":"/n"}`},
		{"Bash", `{"command": "cat <a>"}`, `{"command":"cat <a>"}`},
		{"mcp__s__t", `{"content":"kept: not a file tool"}`, `{"content":"kept: not a file tool"}`},
		{"Write", `not json`, `{"bytes":8}`},
	}
	for _, tt := range tests {
		if got := string(hooks.AuditArgs(tt.tool, json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tt.tool, tt.in, got, tt.want)
		}
	}
}

func TestBoundResponse(t *testing.T) {
	t.Parallel()
	read := `{"type":"text","file":{"filePath":"/a","content":"secret file body","numLines":1}}`
	if got := string(hooks.BoundResponse("Read", json.RawMessage(read))); got != `{"file":{"content":{"bytes":16},"filePath":"/a","numLines":1},"type":"text"}` {
		t.Fatalf("read: %s", got)
	}
	long := `{"stdout":"` + strings.Repeat("x", 5000) + `"}`
	got := hooks.BoundResponse("Bash", json.RawMessage(long))
	if len(got) > hooks.DetailStringLimit+100 || !bytes.Contains(got, []byte("…[truncated, 5000 bytes total]")) {
		t.Fatalf("bash: %d bytes: %.80s", len(got), got)
	}
}

func BenchmarkParseAndMap(b *testing.B) {
	data := readSample(b, "hook-input-PreToolUse-Bash.json")
	b.ReportAllocs()
	for b.Loop() {
		in, err := hooks.ParseInput(bytes.NewReader(data), 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ToCall(in, "/workspace"); err != nil {
			b.Fatal(err)
		}
	}
}
