package coretools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/lib/capped"
)

func TestReadWindow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	h.put("/workspace/f.txt", "one\ntwo\nthree\nfour")
	h.put("/workspace/empty", "")
	h.put("/workspace/nl.txt", "a\r\nb\n")
	cases := []struct {
		args    string
		content string
		lines   LineWindow
	}{
		{`{"path":"f.txt"}`, "one\ntwo\nthree\nfour", LineWindow{1, 4, 4}},
		{`{"path":"f.txt","offset":2}`, "two\nthree\nfour", LineWindow{2, 4, 4}},
		{`{"path":"f.txt","offset":2,"limit":2}`, "two\nthree\n", LineWindow{2, 3, 4}},
		{`{"path":"f.txt","offset":4,"limit":10}`, "four", LineWindow{4, 4, 4}},
		{`{"path":"f.txt","limit":1}`, "one\n", LineWindow{1, 1, 4}},
		{`{"path":"/workspace/f.txt","encoding":"utf-8"}`, "one\ntwo\nthree\nfour", LineWindow{1, 4, 4}},
		{`{"path":"empty"}`, "", LineWindow{0, 0, 0}},
		{`{"path":"nl.txt","offset":2}`, "b\n", LineWindow{2, 2, 2}},
		{`{"path":"nl.txt","limit":1}`, "a\r\n", LineWindow{1, 1, 2}},
	}
	for _, c := range cases {
		out := h.mustCall("read", c.args).Output.(*ReadOutput)
		if out.Content != c.content || *out.Lines != c.lines || out.Truncated {
			t.Errorf("%s: content %q lines %+v truncated %v; want %q %+v", c.args, out.Content, *out.Lines, out.Truncated, c.content, c.lines)
		}
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	h.put("/workspace/f.txt", "one\ntwo\n")
	h.put("/workspace/nul.bin", "ab\x00cd")
	h.put("/workspace/latin1.txt", "caf\xe9\n")
	cases := []struct{ args, want string }{
		{`{"path":"f.txt","offset":3}`, "offset 3 is past the end of the file (2 lines)"},
		{`{"path":"missing.txt"}`, "read /workspace/missing.txt:"},
		{`{"path":"nul.bin"}`, `binary file (NUL byte at offset 2); read it with "encoding":"base64"`},
		{`{"path":"latin1.txt"}`, "binary file (not valid UTF-8)"},
		{`{"path":"."}`, "is a directory"},
	}
	for _, c := range cases {
		_, err := h.call("read", c.args, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.args, err, c.want)
		}
	}
}

func TestReadBase64(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{MaxReadFile: 8})
	h.put("/workspace/nul.bin", "ab\x00c\xff")
	out := h.mustCall("read", `{"path":"nul.bin","encoding":"base64"}`).Output.(*ReadOutput)
	got, _ := base64.StdEncoding.DecodeString(out.Content)
	if string(got) != "ab\x00c\xff" || out.Encoding != "base64" || out.Lines != nil || out.Size != 5 {
		t.Fatalf("base64 read: %+v", out)
	}
	h.put("/workspace/big.bin", "0123456789")
	if _, err := h.call("read", `{"path":"big.bin","encoding":"base64"}`, nil); err == nil || !strings.Contains(err.Error(), "file is 10 bytes, over the read cap of 8 bytes") {
		t.Fatalf("oversized base64 read: %v", err)
	}
}

func TestReadCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{MaxReadFile: 10})
	cases := []struct {
		file, args, content string
		lines               LineWindow
	}{
		{"abc\ndefg\nhijkl\n", `{"path":"f"}`, "abc\ndefg\n", LineWindow{1, 2, 2}},
		{"abc\ndefg\nhijkl\n", `{"path":"f","offset":2}`, "defg\n", LineWindow{2, 2, 2}},
		// no whole line within the cap: cut at a rune boundary, never mid-rune
		{"aaaaaaaaaé\n", `{"path":"f"}`, "aaaaaaaaa", LineWindow{1, 1, 1}},
		{"0123456789abc", `{"path":"f"}`, "0123456789", LineWindow{1, 1, 1}},
	}
	for _, c := range cases {
		h.put("/workspace/f", c.file)
		out := h.mustCall("read", c.args).Output.(*ReadOutput)
		if out.Content != c.content || *out.Lines != c.lines || !out.Truncated || out.Size != int64(len(c.file)) {
			t.Errorf("%q %s: %+v lines %+v; want %q %+v truncated", c.file, c.args, out, *out.Lines, c.content, c.lines)
		}
	}
	h.put("/workspace/f", "abc\ndefg\nhijkl\n")
	_, err := h.call("read", `{"path":"f","offset":3}`, nil)
	if err == nil || !strings.Contains(err.Error(), "read cap of 10 bytes keeps only the first 2 lines") {
		t.Fatalf("offset past the cap: %v", err)
	}
}

// Traversal reaches the container's own /etc, never the host's.
func TestTraversalStaysInSandbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	h.put("/etc/passwd", "root:x:0:0:sandbox\n")
	out := h.mustCall("read", `{"path":"../../etc/passwd"}`).Output.(*ReadOutput)
	if out.Path != "/etc/passwd" || out.Content != "root:x:0:0:sandbox\n" {
		t.Fatalf("read ../../etc/passwd: %+v", out)
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	names := []string{"a.txt", "deep/er/dir/b.txt", `it's "q".txt`, "sp ace/new\nline.txt", "$(touch pwned)", "`id`;echo", "../outside.txt"}
	for _, name := range names {
		content := "content of " + name
		out := h.mustCall("write", jsonArgs(t, map[string]string{"path": name, "content": content})).Output.(*WriteOutput)
		want := "/workspace/" + name
		if name == "../outside.txt" {
			want = "/outside.txt"
		}
		if out.Path != want || out.Bytes != int64(len(content)) || h.get(want) != content {
			t.Errorf("write %q: %+v, file %q", name, out, h.get(want))
		}
	}
	if _, err := os.Stat(h.sb.host("/workspace/pwned")); err == nil {
		t.Fatal("a $(...) file name ran a command")
	}
	h.mustCall("write", `{"path":"a.txt","content":""}`)
	if h.get("/workspace/a.txt") != "" {
		t.Fatal("empty write did not empty the file")
	}
	out := h.mustCall("write", `{"path":"bin","content":"AP8A/w==","encoding":"base64"}`).Output.(*WriteOutput)
	if out.Bytes != 4 || h.get("/workspace/bin") != "\x00\xff\x00\xff" {
		t.Fatalf("base64 write: %+v %q", out, h.get("/workspace/bin"))
	}
}

func TestWriteTooLarge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{}) // default MaxWrite: 64 MiB
	h.limits.MaxWrite = 10 << 20
	big := jsonArgs(t, map[string]string{"path": "big", "content": strings.Repeat("x", 50<<20)})
	_, err := h.prepare("write", big)
	if err == nil || !strings.Contains(err.Error(), "content is 52428800 bytes, over the write limit of 10485760 bytes") {
		t.Fatalf("50 MiB write: %v", err)
	}
	b64 := jsonArgs(t, map[string]string{"path": "big", "content": base64.StdEncoding.EncodeToString(make([]byte, 10<<20+1)), "encoding": "base64"})
	if _, err := h.prepare("write", b64); err == nil || !strings.Contains(err.Error(), "over the write limit") {
		t.Fatalf("oversized base64 write: %v", err)
	}
	if _, err := os.Stat(h.sb.host("/workspace/big")); !os.IsNotExist(err) {
		t.Fatalf("refused write left a file: %v", err)
	}
}

func TestPatchReplace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	const orig = "alpha beta\ngamma beta\n"
	cases := []struct {
		old, new, want, err string
	}{
		{"alpha", "ALPHA", "ALPHA beta\ngamma beta\n", ""},
		{"gamma beta\n", "", "alpha beta\n", ""},
		{"beta", "x", orig, "old text matches 2 times"},
		{"delta", "x", orig, "old text not found"},
		{"Alpha", "x", orig, "old text not found"},
	}
	for _, c := range cases {
		h.put("/workspace/f", orig)
		res, err := h.call("patch", jsonArgs(t, map[string]string{"path": "f", "old": c.old, "new": c.new}), nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "file unchanged") {
				t.Errorf("old %q: err %v, want %q", c.old, err, c.err)
			}
		} else if err != nil {
			t.Errorf("old %q: %v", c.old, err)
		} else if out := res.Output.(*PatchOutput); out.Replacements != 1 || out.Bytes != len(c.want) {
			t.Errorf("old %q: %+v", c.old, out)
		}
		if got := h.get("/workspace/f"); got != c.want {
			t.Errorf("old %q: file %q, want %q", c.old, got, c.want)
		}
	}
	// overlapping matches are ambiguous too
	h.put("/workspace/f", "aaa")
	if _, err := h.call("patch", `{"path":"f","old":"aa","new":"b"}`, nil); err == nil || !strings.Contains(err.Error(), "matches 2 times") {
		t.Fatalf("overlapping match: %v", err)
	}
}

func TestPatchDiff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	const orig = "one\ntwo\nthree\nfour\nfive\n"
	cases := []struct {
		diff, want, err string
	}{
		{"--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n two\n-three\n+THREE\n four\n", "one\ntwo\nTHREE\nfour\nfive\n", ""},
		{"@@ -1,2 +1,1 @@\n-one\n two\n@@ -5 +4,2 @@\n five\n+six\n", "two\nthree\nfour\nfive\nsix\n", ""},
		{"@@ -2,3 +2,3 @@\n two\n-tree\n+THREE\n four\n", orig, `line 3 does not match: the diff expects "tree\n", the file has "three\n"`},
		{"@@ -1,2 +1,2 @@\n-one\n+ONE\n two\n@@ -4,2 +4,2 @@\n four\n-fiv\n+FIVE\n", orig, "hunk 2"},
		{"@@ -3,3 +3,3 @@\n two\n-three\n+THREE\n four\n", orig, "does not match"},
		{"@@ -5,2 +5,2 @@\n five\n-six\n+SIX\n", orig, "the file ends at line 5"},
	}
	for _, c := range cases {
		h.put("/workspace/f", orig)
		res, err := h.call("patch", jsonArgs(t, map[string]string{"path": "f", "diff": c.diff}), nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "file unchanged") {
				t.Errorf("%q: err %v, want %q", c.diff, err, c.err)
			}
		} else if err != nil {
			t.Errorf("%q: %v", c.diff, err)
		} else if out := res.Output.(*PatchOutput); out.Hunks != strings.Count(c.diff, "@@ -") || out.Bytes != len(c.want) {
			t.Errorf("%q: %+v", c.diff, out)
		}
		if got := h.get("/workspace/f"); got != c.want {
			t.Errorf("%q: file %q, want %q", c.diff, got, c.want)
		}
	}
}

func TestPatchLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{MaxWrite: 8})
	h.put("/workspace/f", "0123456789")
	if _, err := h.call("patch", `{"path":"f","old":"0","new":"x"}`, nil); err == nil || !strings.Contains(err.Error(), "file is 10 bytes, over the write limit of 8") {
		t.Fatalf("patching an oversized file: %v", err)
	}
	h.put("/workspace/f", "0123")
	if _, err := h.call("patch", `{"path":"f","old":"0","new":"xxxxxxx"}`, nil); err == nil || !strings.Contains(err.Error(), "the result would be 10 bytes") {
		t.Fatalf("patch growing past the limit: %v", err)
	}
	if h.get("/workspace/f") != "0123" {
		t.Fatal("refused patch changed the file")
	}
}

func execOut(t *testing.T, res *gateway.Result) *ExecOutput {
	t.Helper()
	out := res.Output.(*ExecOutput)
	if res.ExitCode == nil || *res.ExitCode != out.ExitCode {
		t.Fatalf("result exit code %v, output %d", res.ExitCode, out.ExitCode)
	}
	return out
}

func TestExec(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	h.put("/workspace/sub/file", "")
	cases := []struct {
		args           string
		stdout, stderr string
		code           int
	}{
		{`{"command":"echo hi; echo err >&2; exit 3"}`, "hi\n", "err\n", 3},
		{`{"argv":["printf","%s|","$(id)","a b","it's"]}`, "$(id)|a b|it's|", "", 0},
		{`{"command":"ls","cwd":"sub"}`, "file\n", "", 0},
		{`{"command":"echo \"$GREETING\"","env":{"GREETING":"hello $(world)"}}`, "hello $(world)\n", "", 0},
		{`{"command":"echo $TOOLGATE_CALL_ID"}`, "call-1\n", "", 0},
		{`{"argv":["cat"],"stdin":"fed\n"}`, "fed\n", "", 0},
		{`{"argv":["sh","-c","exit 0"]}`, "", "", 0},
	}
	for _, c := range cases {
		out := execOut(t, h.mustCall("exec", c.args))
		if out.Stdout != c.stdout || out.Stderr != c.stderr || out.ExitCode != c.code || out.TimedOut || out.Truncated {
			t.Errorf("%s: %+v; want %q %q %d", c.args, out, c.stdout, c.stderr, c.code)
		}
	}
	if spec := h.sb.execs[2]; spec.Cwd != "/workspace/sub" {
		t.Errorf("cwd sent to the sandbox: %q", spec.Cwd)
	}
}

// A call that waited for its turn in the sandbox says how long in its
// result's detail (whole milliseconds; under one, nothing), and the
// decision's detail stays as it was written.
func TestExecQueuedInDetail(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	for _, c := range []struct {
		queued time.Duration
		want   any
	}{
		{0, nil},
		{900 * time.Microsecond, nil},
		{25*time.Millisecond + 600*time.Microsecond, int64(25)},
	} {
		h.sb.queued = c.queued
		call, err := h.prepare("exec", `{"command":"true"}`)
		if err != nil {
			t.Fatal(err)
		}
		decided := map[string]any{"kept": true}
		call.Detail = decided
		if _, err := h.tools["exec"].Run(context.Background(), call, &gateway.RunEnv{Agent: testAgent, Sandbox: h.sb}); err != nil {
			t.Fatal(err)
		}
		if got := call.Detail["queuedMs"]; got != c.want || call.Detail["kept"] != true {
			t.Errorf("queued %v: detail %v, want queuedMs %v", c.queued, call.Detail, c.want)
		}
		if len(decided) != 1 {
			t.Errorf("the decision's detail changed: %v", decided)
		}
	}
}

func TestExecTimesOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	res := h.mustCall("exec", `{"command":"echo started; sleep 1000 & wait","timeout":"200ms"}`)
	out := execOut(t, res)
	if !out.TimedOut || out.Stdout != "started\n" || !strings.Contains(res.Error, "timed out after 200ms") {
		t.Fatalf("timed-out exec: %+v, error %q", out, res.Error)
	}
	if spec := h.sb.execs[0]; spec.Timeout.String() != "200ms" {
		t.Fatalf("timeout sent to the sandbox: %v", spec.Timeout)
	}
}

// A command printing 100 MiB keeps MaxOutput per stream and a marker saying
// how much was dropped; the process runs to the end.
func TestExecOutputCapped(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	h := newHarness(t, config.Limits{MaxOutput: limit})
	res := h.mustCall("exec", `{"command":"head -c 104857600 /dev/zero | tr '\\0' o; head -c 3000000 /dev/zero >&2; echo done >&2"}`)
	out := execOut(t, res)
	wantOut := strings.Repeat("o", limit) + fmt.Sprintf(capped.Marker, 100<<20-limit)
	if out.Stdout != wantOut {
		t.Errorf("stdout: %d bytes ending %q", len(out.Stdout), out.Stdout[max(len(out.Stdout)-60, 0):])
	}
	wantErr := strings.Repeat("\x00", limit) + fmt.Sprintf(capped.Marker, 3000000+5-limit)
	if out.Stderr != wantErr {
		t.Errorf("stderr: %d bytes ending %q", len(out.Stderr), out.Stderr[max(len(out.Stderr)-60, 0):])
	}
	if !out.Truncated || out.ExitCode != 0 {
		t.Errorf("truncated %v exit %d", out.Truncated, out.ExitCode)
	}
}

func TestExecStreams(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{MaxOutput: 4})
	var stdout, stderr bytes.Buffer
	io := &gateway.Streams{Stdin: strings.NewReader("from caller"), Stdout: &stdout, Stderr: &stderr}
	call, err := h.prepare("exec", `{"command":"cat; echo e >&2"}`)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.tools["exec"].Run(context.Background(), call, &gateway.RunEnv{Agent: testAgent, Sandbox: h.sb, IO: io})
	if err != nil {
		t.Fatal(err)
	}
	// The result entry says what the command was given.
	if sum := sha256.Sum256([]byte("from caller")); call.Detail["stdinBytes"] != int64(11) || call.Detail["stdinSha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("result detail %v, want stdinBytes 11 and the input's SHA-256", call.Detail)
	}
	out := execOut(t, res)
	if out.Stdout != "" || out.Stderr != "" || !out.Truncated {
		t.Errorf("streamed result carries output: %+v", out)
	}
	if want := "from" + fmt.Sprintf(capped.Marker, 7); stdout.String() != want {
		t.Errorf("streamed stdout %q, want %q", stdout.String(), want)
	}
	if stderr.String() != "e\n" {
		t.Errorf("streamed stderr %q", stderr.String())
	}
}

// A caller that goes away does not stop or block the process.
func TestExecStreamFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{})
	io := &gateway.Streams{Stdout: failWriter{}, Stderr: failWriter{}}
	res, err := h.call("exec", `{"command":"head -c 1000000 /dev/zero; exit 4"}`, io)
	if err != nil {
		t.Fatal(err)
	}
	if out := execOut(t, res); out.ExitCode != 4 || !strings.Contains(res.Error, "output stream failed: gone") {
		t.Fatalf("%+v, error %q", out, res.Error)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("gone") }

func TestRunNeedsSandbox(t *testing.T) {
	t.Parallel()
	for _, tool := range New(nil, nil) {
		args := map[string]string{"read": `{"path":"a"}`, "write": `{"path":"a","content":""}`, "patch": `{"path":"a","old":"x","new":"y"}`, "exec": `{"command":"true"}`}[tool.Name()]
		call := &gateway.Call{Agent: "a", Args: []byte(args)}
		if err := tool.Prepare(call, testAgent); err != nil {
			t.Fatal(err)
		}
		if _, err := tool.Run(t.Context(), call, &gateway.RunEnv{}); err != errNoSandbox {
			t.Errorf("%s without a sandbox: %v", tool.Name(), err)
		}
	}
}

// silentSandbox never answers a file operation until its context ends, as
// a hostile sandbox's executor could.
type silentSandbox struct{ gateway.Sandbox }

func (silentSandbox) ReadFile(ctx context.Context, _ string, _ int64) (*gateway.File, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (silentSandbox) WriteFile(ctx context.Context, _ string, _ []byte) error {
	<-ctx.Done()
	return ctx.Err()
}

// A sandbox that stops answering holds a file tool no longer than the
// agent's exec timeout, even when the caller never gives up.
func TestFileToolsEndAtTheExecTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.Limits{ExecTimeout: 50 * time.Millisecond})
	for tool, args := range map[string]string{
		"read":  `{"path":"a"}`,
		"write": `{"path":"a","content":"x"}`,
		"patch": `{"path":"a","old":"x","new":"y"}`,
	} {
		call, err := h.prepare(tool, args)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := h.tools[tool].Run(context.Background(), call, &gateway.RunEnv{Agent: testAgent, Sandbox: silentSandbox{}})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: %v, want the deadline", tool, err)
			}
		case <-time.After(10 * time.Second): // a hang guard, not a speed assertion
			t.Fatalf("%s: still waiting on a silent sandbox", tool)
		}
	}
}
