package gatewaycmd

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
)

// TestUsageRendersModels: a model name comes from a provider's answer (or
// a request); `usage` shows it as one visible cell, never as a control
// sequence or a row of its own, and --json as it is.
func TestUsageRendersModels(t *testing.T) {
	const model = "claude\x1b]0;pwned\x07\u202e\n\tfake-row\t9\t"
	home := t.TempDir()
	w, err := audit.Open(filepath.Join(home, "logs"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&gateway.Entry{TS: time.Now(), ID: gateway.NewID(), Phase: gateway.PhaseResult, Agent: "demo", Type: gateway.KindModel,
		Tool: "anthropic", Decision: "allow", Detail: map[string]any{"model": model, "inputTokens": 3, "outputTokens": 4}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		r, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout := os.Stdout
		os.Stdout = pw
		root := NewRootCmd()
		root.SetArgs(append([]string{"--home", home}, args...))
		err = root.Execute()
		os.Stdout = stdout
		pw.Close()
		out, _ := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return string(out)
	}
	got := run("usage")
	for _, r := range got {
		if textsafe.Unsafe(r) {
			t.Fatalf("%U reaches the terminal:\n%q", r, got)
		}
	}
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 3 || !strings.Contains(lines[1], `claude\x1b]0;pwned\x07\u202e\n\tfake-row\t9\t`) {
		t.Fatalf("usage, want a header, one row and the total:\n%s", got)
	}
	if js := run("usage", "--json"); !strings.Contains(js, `"model":"claude\u001b]0;pwned\u0007`+"\u202e"+`\n\tfake-row\t9\t"`) {
		t.Fatalf("usage --json changed: %s", js)
	}
}

// TestToolsListLine: an upstream server's description (its text, not
// ours) is one short visible line in `tools list`.
func TestToolsListLine(t *testing.T) {
	got := oneLine("Reads files.\n\x1b]52;c;cm0gLXJmIH4=\x07 \u202eeldnah\u202c\r\n  echo\tok " + strings.Repeat("x", 200))
	for _, r := range got {
		if textsafe.Unsafe(r) || r == '\n' || r == '\t' {
			t.Fatalf("%U in %q", r, got)
		}
	}
	if !strings.HasPrefix(got, `Reads files. \x1b]52;c;cm0gLXJmIH4=\x07 \u202eeldnah\u202c echo ok x`) || !strings.HasSuffix(got, "…") {
		t.Fatalf("oneLine: %q", got)
	}
}
