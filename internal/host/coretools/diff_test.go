package coretools

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

func TestApplyDiff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, before, diff, after, err string
	}{
		{"replace", "a\nb\nc\n", "@@ -2 +2 @@\n-b\n+B\n", "a\nB\nc\n", ""},
		{"git headers", "a\n", "diff --git a/f b/f\nindex 1..2 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@ ctx\n-a\n+b\n", "b\n", ""},
		{"insert at top", "a\n", "@@ -0,0 +1 @@\n+z\n", "z\na\n", ""},
		{"insert after line", "a\nb\n", "@@ -1,0 +2 @@\n+z\n", "a\nz\nb\n", ""},
		{"new file", "", "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n", "x\ny\n", ""},
		{"delete all", "x\ny\n", "@@ -1,2 +0,0 @@\n-x\n-y\n", "", ""},
		{"add final newline", "a", "@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n", "a\n", ""},
		{"drop final newline", "a\n", "@@ -1 +1 @@\n-a\n+a\n\\ No newline at end of file\n", "a", ""},
		{"empty context line without its space", "a\n\nb\n", "@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n", "a\n\nc\n", ""},
		{"trailing blank lines", "a\n", "@@ -1 +1 @@\n-a\n+b\n\n\n", "b\n", ""},
		{"crlf kept", "a\r\nb\r\n", "@@ -1 +1 @@\n-a\r\n+A\r\n", "A\r\nb\r\n", ""},
		{"newline state must match", "a", "@@ -1 +1 @@\n-a\n+b\n", "", `the diff expects "a\n", the file has "a"`},
		{"bad context", "a\nb\n", "@@ -1,2 +1,2 @@\n x\n-b\n+c\n", "", "line 1 does not match"},
		{"wrong line number", "a\nb\nc\n", "@@ -1 +1 @@\n-b\n+B\n", "", "line 1 does not match"},
		{"out of order", "a\nb\nc\n", "@@ -3 +3 @@\n-c\n+C\n@@ -1 +1 @@\n-a\n+A\n", "", "hunk 2"},
		{"past the end", "a\n", "@@ -5 +5 @@\n-a\n+b\n", "", "starts past the end of the file"},
		{"insert splits unterminated line", "a", "@@ -1,0 +2 @@\n+b\n", "", "without a newline in the middle"},
		{"second file", "a\n", "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-x\n+y\n", "", "a second file header"},
		{"garbage after hunk", "a\n", "@@ -1 +1 @@\n-a\n+b\nhello\n", "", `expected a hunk header`},
		{"too many lines", "a\n", "@@ -1 +1 @@\n-a\n-b\n+b\n", "", "more lines than its header counts"},
		{"cut short", "a\n", "@@ -1,2 +1,2 @@\n-a\n+b\n", "", "is cut short"},
		{"bad op", "a\n", "@@ -1 +1 @@\n*a\n+b\n", "", "must start with ' ', '-' or '+'"},
		{"bad header", "a\n", "@@ -x +1 @@\n-a\n+b\n", "", "malformed hunk header"},
		{"no hunks", "a\n", "--- a/f\n+++ b/f\n", "", "no hunks"},
		{"empty hunk", "a\n", "@@ -1,0 +1,0 @@\n", "", "empty hunk"},
		{"line zero", "a\n", "@@ -0,1 +1 @@\n-a\n+b\n", "", "start at 1"},
		{"huge numbers", "a\n", "@@ -99999999999999999999 +1 @@\n-a\n+b\n", "", "malformed hunk header"},
		{"marker first", "a\n", "@@ -1 +1 @@\n\\ No newline\n-a\n+b\n", "", "no line before it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hunks, err := parseDiff(c.diff)
			var got string
			if err == nil {
				got, err = applyDiff(c.before, hunks)
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.after {
				t.Fatalf("got %q, %v; want %q", got, err, c.after)
			}
		})
	}
}

// Diffs written by diff(1) apply and give the new file.
func TestApplyDiffFromDiffTool(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff(1) on this machine")
	}
	pairs := [][2]string{
		{"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n", "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nL\nm\nn\n"},
		{"x\ny", "x\ny\n"},
		{"x\ny\n", "x\nz"},
		{"", "new\n"},
		{"gone\n", ""},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "0\n1\n2\n3\n5\n6\n7\n8\n9\n10\n11\n"},
	}
	dir := t.TempDir()
	for _, p := range pairs {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		if os.WriteFile(a, []byte(p[0]), 0o644) != nil || os.WriteFile(b, []byte(p[1]), 0o644) != nil {
			t.Fatal("writing test files")
		}
		d, _ := exec.Command("diff", "-u", a, b).Output() // exit 1: files differ
		hunks, err := parseDiff(string(d))
		if err != nil {
			t.Fatalf("%q→%q: parse %v\n%s", p[0], p[1], err, d)
		}
		got, err := applyDiff(p[0], hunks)
		if err != nil || got != p[1] {
			t.Fatalf("%q→%q: got %q, %v\n%s", p[0], p[1], got, err, d)
		}
	}
}

// unifiedDiff writes a one-hunk diff from a to b with up to 3 lines of
// context, as diff -u would for a single change.
func unifiedDiff(a, b string) string {
	al, bl := splitKeep(a), splitKeep(b)
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	ctxPre, ctxSuf := min(pre, 3), min(suf, 3)
	oldLines := al[pre-ctxPre : len(al)-suf+ctxSuf]
	newLines := bl[pre-ctxPre : len(bl)-suf+ctxSuf]
	start := func(n int) int {
		if n == 0 {
			return pre - ctxPre
		}
		return pre - ctxPre + 1
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- a/f\n+++ b/f\n@@ -%d,%d +%d,%d @@\n", start(len(oldLines)), len(oldLines), start(len(newLines)), len(newLines))
	line := func(op byte, l string) {
		sb.WriteByte(op)
		sb.WriteString(strings.TrimSuffix(l, "\n"))
		sb.WriteByte('\n')
		if !strings.HasSuffix(l, "\n") {
			sb.WriteString("\\ No newline at end of file\n")
		}
	}
	for _, l := range oldLines[:ctxPre] {
		line(' ', l)
	}
	for _, l := range oldLines[ctxPre : len(oldLines)-ctxSuf] {
		line('-', l)
	}
	for _, l := range newLines[ctxPre : len(newLines)-ctxSuf] {
		line('+', l)
	}
	for _, l := range oldLines[len(oldLines)-ctxSuf:] {
		line(' ', l)
	}
	return sb.String()
}

func splitKeep(s string) []string {
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// FuzzDiffRoundTrip: a diff from a to b applied to a gives b.
func FuzzDiffRoundTrip(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n")
	f.Add("x", "x\n")
	f.Add("", "y\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\n5\n6\n7\n8")
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == b {
			t.Skip()
		}
		d := unifiedDiff(a, b)
		hunks, err := parseDiff(d)
		if err != nil {
			t.Fatalf("parse: %v\n%s", err, d)
		}
		got, err := applyDiff(a, hunks)
		if err != nil {
			t.Fatalf("apply: %v\n%s", err, d)
		}
		if got != b {
			t.Fatalf("got %q, want %q\n%s", got, b, d)
		}
	})
}

// FuzzParseDiff: any input parses or fails cleanly, and a diff that applies
// changes the line count exactly as its headers say.
func FuzzParseDiff(f *testing.F) {
	f.Add("@@ -1,2 +1,2 @@\n a\n-b\n+c\n", "a\nb\n")
	f.Add("@@ -0,0 +1 @@\n+z\n\\ No newline at end of file\n", "")
	f.Add("--- a\n+++ b\n@@ -1 +1 @@\n-x\n\\ x\n+y\n\n", "x")
	f.Fuzz(func(t *testing.T, diff, content string) {
		hunks, err := parseDiff(diff)
		if err != nil {
			return
		}
		delta := 0
		for _, h := range hunks {
			delta += h.newCount - h.oldCount
		}
		got, err := applyDiff(content, hunks)
		if err != nil {
			return
		}
		if n, m := len(splitKeep(got)), len(splitKeep(content)); n != m+delta {
			t.Fatalf("%d lines became %d, headers say %+d", m, n, delta)
		}
	})
}

// FuzzPrepare: no argument bytes crash Prepare, and accepted calls carry
// clean facts.
func FuzzPrepare(f *testing.F) {
	f.Add("read", `{"path":"../../etc/passwd","offset":2,"limit":3}`)
	f.Add("write", `{"path":"a","content":"x","encoding":"base64"}`)
	f.Add("patch", `{"path":"a","diff":"@@ -1 +1 @@\n-a\n+b\n"}`)
	f.Add("exec", `{"command":"ls","env":{"A":"b"},"timeout":"3s","cwd":".."}`)
	f.Add("exec", `{"argv":["a"],"timeout":1e9}`)
	tools := map[string]gateway.Tool{}
	for _, tool := range New(func(string) config.Limits { return config.Limits{MaxWrite: 1 << 16} }, nil) {
		tools[tool.Name()] = tool
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		tool, ok := tools[name]
		if !ok {
			return
		}
		call := &gateway.Call{Agent: "a", Args: json.RawMessage(args)}
		if err := tool.Prepare(call, testAgent); err != nil {
			return
		}
		if !strings.HasPrefix(call.Path, "/") || strings.Contains(call.Path, "/../") || strings.HasSuffix(call.Path, "/..") || strings.IndexByte(call.Path, 0) >= 0 {
			t.Fatalf("unclean path %q", call.Path)
		}
		if name == "exec" && (len(call.Argv) == 0 || call.Argv[0] == "") {
			t.Fatalf("exec without argv: %q", call.Argv)
		}
		if aa, ok := tool.(gateway.AuditArgs); ok && !json.Valid(aa.AuditArgs(call)) {
			t.Fatalf("audit args not JSON")
		}
	})
}
