package coretools

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

func TestPreparePath(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	cases := []struct {
		path, want string
	}{
		{"notes/a.txt", "/workspace/notes/a.txt"},
		{"./notes//a.txt", "/workspace/notes/a.txt"},
		{"../../etc/passwd", "/etc/passwd"},
		{"../../../../../../etc/passwd", "/etc/passwd"},
		{"/workspace/../etc/shadow", "/etc/shadow"},
		{"/tmp/x/", "/tmp/x"},
		{".", "/workspace"},
		{`it's "quoted".txt`, `/workspace/it's "quoted".txt`},
		{"with space/and\nnewline", "/workspace/with space/and\nnewline"},
		{"$(rm -rf ~)`id`;x", "/workspace/$(rm -rf ~)`id`;x"},
	}
	for _, tool := range []string{"read", "write", "patch"} {
		for _, c := range cases {
			args := map[string]any{"path": c.path}
			switch tool {
			case "write":
				args["content"] = "x"
			case "patch":
				args["old"], args["new"] = "a", "b"
			}
			call, err := h.prepare(tool, jsonArgs(t, args))
			if err != nil {
				t.Errorf("%s %q: %v", tool, c.path, err)
				continue
			}
			if call.Path != c.want {
				t.Errorf("%s %q: Path = %q, want %q", tool, c.path, call.Path, c.want)
			}
		}
	}
}

func TestPrepareWorkspaceDefault(t *testing.T) {
	t.Parallel()
	tool := New(nil, nil)[0]
	call := &gateway.Call{Agent: "x", Args: json.RawMessage(`{"path":"a"}`)}
	if err := tool.Prepare(call, gateway.AgentInfo{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if call.Path != "/workspace/a" {
		t.Fatalf("Path = %q", call.Path)
	}
}

func TestPrepareExecFacts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	cases := []struct {
		args    string
		argv    []string
		command string
		path    string
	}{
		{`{"command":"echo $(id) 'a b'"}`, []string{"/bin/sh", "-c", "echo $(id) 'a b'"}, "echo $(id) 'a b'", "/workspace"},
		{`{"argv":["ls","-l","$(x)"]}`, []string{"ls", "-l", "$(x)"}, "", "/workspace"},
		{`{"argv":["ls"],"cwd":"src/../.."}`, []string{"ls"}, "", "/"},
		{`{"argv":["ls"],"cwd":"/tmp"}`, []string{"ls"}, "", "/tmp"},
	}
	for _, c := range cases {
		call, err := h.prepare("exec", c.args)
		if err != nil {
			t.Errorf("%s: %v", c.args, err)
			continue
		}
		if !slices.Equal(call.Argv, c.argv) || call.Command != c.command || call.Path != c.path {
			t.Errorf("%s: argv %q command %q path %q; want %q %q %q", c.args, call.Argv, call.Command, call.Path, c.argv, c.command, c.path)
		}
	}
}

func TestPrepareRejects(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{MaxWrite: 1 << 20, ExecTimeout: time.Minute})
	cases := []struct {
		tool, args, want string
	}{
		{"read", ``, "arguments are required"},
		{"read", `null`, "arguments are required"},
		{"read", `[]`, "must be a JSON object"},
		{"read", `"a"`, "must be a JSON object"},
		{"read", `{"path":"a"} {}`, "unexpected data"},
		{"read", `{"path":"a",`, "not valid JSON"},
		{"read", `{}`, "path is required"},
		{"read", `{"path":""}`, "path is required"},
		{"read", `{"path":"a\u0000b"}`, "NUL byte"},
		{"read", `{"path":1}`, "path: want a string, got number"},
		{"read", `{"path":"a","offset":"1"}`, "offset: want an integer, got string"},
		{"read", `{"path":"a","offset":1.5}`, "offset: want an integer"},
		{"read", `{"path":"a","offset":0}`, "1-based"},
		{"read", `{"path":"a","limit":-1}`, "at least 1"},
		{"read", `{"path":"a","offset":1e30}`, "offset: want an integer"},
		{"read", `{"path":"a","encoding":"latin1"}`, `encoding must be`},
		{"read", `{"path":"a","encoding":"base64","limit":3}`, "do not apply to base64"},
		{"read", `{"path":"a","mode":"x"}`, `unknown field "mode" (allowed: path, offset, limit, encoding)`},
		{"read", "{\"path\":\"a\xff\"}", "invalid UTF-8"},
		{"write", `{"path":"a"}`, "content is required"},
		{"write", `{"path":"a","content":null}`, "content is required"},
		{"write", `{"path":"a","content":5}`, "content: want a string, got number"},
		{"write", `{"path":"a","content":"x","mode":420}`, `unknown field "mode"`},
		{"write", "{\"path\":\"a\",\"content\":\"caf\xe9\"}", "invalid UTF-8"},
		{"write", `{"path":"a","content":"!!","encoding":"base64"}`, "not valid base64"},
		{"write", `{"path":"a","content":"","encoding":"hex"}`, "encoding must be"},
		{"patch", `{"path":"a"}`, "give old and new"},
		{"patch", `{"path":"a","old":"x"}`, "new is required"},
		{"patch", `{"path":"a","new":"x"}`, "old is required"},
		{"patch", `{"path":"a","old":"","new":"x"}`, "must not be empty"},
		{"patch", `{"path":"a","old":"x","new":"y","diff":"@@ -1 +1 @@\n-x\n+y\n"}`, "not both"},
		{"patch", `{"path":"a","diff":"nonsense"}`, "no hunks"},
		{"patch", `{"path":"a","diff":"@@ -1 +1 @@\n-x\n"}`, "cut short"},
		{"patch", `{"path":"a","old":"x","new":"y","replaceAll":true}`, `unknown field "replaceAll"`},
		{"exec", `{}`, "command (a shell string) or argv (an array) is required"},
		{"exec", `{"command":"ls","argv":["ls"]}`, "not both"},
		{"exec", `{"command":""}`, "command is empty"},
		{"exec", `{"command":"ls\u0000"}`, "NUL byte"},
		{"exec", `{"argv":[]}`, "must start with a program"},
		{"exec", `{"argv":[""]}`, "must start with a program"},
		{"exec", `{"argv":"ls -l"}`, "argv: want an array of strings, got string"},
		{"exec", `{"argv":["ls",1]}`, "want a string, got number"},
		{"exec", `{"argv":["ls","a\u0000"]}`, "argv[1] contains a NUL byte"},
		{"exec", `{"argv":["ls"],"env":{"A-B":"1"}}`, `env name "A-B" is not valid`},
		{"exec", `{"argv":["ls"],"env":{"1A":"1"}}`, `env name "1A"`},
		{"exec", `{"argv":["ls"],"env":{"":"1"}}`, `env name ""`},
		{"exec", `{"argv":["ls"],"env":{"A":1}}`, "want a string, got number"},
		{"exec", `{"argv":["ls"],"env":["A=1"]}`, "env: want an object of strings, got array"},
		{"exec", `{"argv":["ls"],"env":{"A":"x\u0000"}}`, "env A contains a NUL byte"},
		{"exec", `{"argv":["ls"],"cwd":"a\u0000"}`, "cwd contains a NUL byte"},
		{"exec", `{"argv":["ls"],"stdin":7}`, "stdin: want a string"},
		{"exec", `{"argv":["ls"],"timeout":"soon"}`, `timeout "soon" is neither a duration`},
		{"exec", `{"argv":["ls"],"timeout":"30"}`, `timeout "30" is neither a duration`},
		{"exec", `{"argv":["ls"],"timeout":"-5s"}`, "timeout must be positive"},
		{"exec", `{"argv":["ls"],"timeout":0}`, "timeout must be positive"},
		{"exec", `{"argv":["ls"],"timeout":-1}`, "timeout must be positive"},
		{"exec", `{"argv":["ls"],"timeout":true}`, "want a duration string or a number of seconds"},
		{"exec", `{"argv":["ls"],"timeout":{}}`, "want a duration string or a number of seconds"},
		{"exec", `{"argv":["ls"],"shell":true}`, `unknown field "shell" (allowed: command, argv, cwd, env, secretEnv, stdin, timeout)`},
	}
	for _, c := range cases {
		_, err := h.prepare(c.tool, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: err = %v, want it to mention %q", c.tool, c.args, err, c.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), c.tool+": ") {
			t.Errorf("%s %q: error %q does not name the tool", c.tool, c.args, err)
		}
	}
}

func TestExecTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{ExecTimeout: time.Minute})
	cases := []struct {
		timeout string
		want    time.Duration
	}{
		{``, time.Minute},
		{`,"timeout":null`, time.Minute},
		{`,"timeout":"1.5s"`, 1500 * time.Millisecond},
		{`,"timeout":"2h"`, time.Minute},
		{`,"timeout":2.5`, 2500 * time.Millisecond},
		{`,"timeout":1e300`, time.Minute},
		{`,"timeout":60`, time.Minute},
	}
	for _, c := range cases {
		_, got, err := h.tools["exec"].(*Exec).parse(json.RawMessage(`{"argv":["true"]`+c.timeout+`}`), testAgent.Name)
		if err != nil || got != c.want {
			t.Errorf("timeout %s: got %v, %v; want %v", c.timeout, got, err, c.want)
		}
	}
}

func TestAuditArgs(t *testing.T) {
	t.Parallel()
	tools := map[string]gateway.Tool{}
	for _, tool := range New(nil, nil) {
		tools[tool.Name()] = tool
	}
	cases := []struct {
		tool, args, want string
	}{
		{"write", `{"path":"a","content":"héllo"}`, `{"content":{"bytes":6},"path":"a"}`},
		{"write", `{"path":"a","content":"aGVsbG8=","encoding":"base64"}`, `{"content":{"bytes":5},"encoding":"base64","path":"a"}`},
		{"write", `{"path":"a","content":[1,2,3]}`, `{"content":{"bytes":7},"path":"a"}`},
		{"write", `{"path":"a"}`, `{"path":"a"}`},
		{"exec", `{"command":"cat","stdin":"secret"}`, `{"command":"cat","stdin":{"bytes":6}}`},
		{"exec", `{"command":"ls"}`, `{"command":"ls"}`},
		{"exec", `[1]`, `[1]`},
	}
	for _, c := range cases {
		// As refused before Prepare (sized from the JSON), and as prepared
		// (sized from what Prepare decoded): the same record either way.
		call := &gateway.Call{Agent: "a", Tool: c.tool, Args: json.RawMessage(c.args)}
		aa := tools[c.tool].(gateway.AuditArgs)
		if got := string(aa.AuditArgs(call)); got != c.want {
			t.Errorf("%s %s: audit args %s, want %s", c.tool, c.args, got, c.want)
		}
		if tools[c.tool].Prepare(call, testAgent) == nil {
			if got := string(aa.AuditArgs(call)); got != c.want {
				t.Errorf("%s %s prepared: audit args %s, want %s", c.tool, c.args, got, c.want)
			}
		}
	}
	for _, name := range []string{"read", "patch"} {
		if _, ok := tools[name].(gateway.AuditArgs); ok {
			t.Errorf("%s should keep its arguments (the audit bounder cuts long strings)", name)
		}
	}
}

// The schemas document exactly the fields the tools accept.
func TestSchemasMatchArgs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		schema string
		args   any
	}{
		{ReadSchema, &readArgs{}},
		{WriteSchema, &writeArgs{}},
		{PatchSchema, &patchArgs{}},
		{ExecSchema, &execArgs{}},
	}
	for _, c := range cases {
		var s struct {
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal([]byte(c.schema), &s); err != nil {
			t.Fatalf("%T schema is not JSON: %v", c.args, err)
		}
		var props []string
		for k := range s.Properties {
			props = append(props, k)
		}
		fields := fieldNames(c.args)
		slices.Sort(props)
		slices.Sort(fields)
		if !reflect.DeepEqual(props, fields) {
			t.Errorf("%T: schema properties %v, struct fields %v", c.args, props, fields)
		}
	}
}
