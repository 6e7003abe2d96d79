package systemtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

// hostile is what an agent puts in its calls to act on the operator's
// terminal and eye: clear the screen, set the window title, write the
// clipboard (OSC 52), a carriage return over the line, bidirectional
// overrides and isolates, a C1 control, DEL, a byte that is not UTF-8, and
// a newline forging a line of `audit show --session`.
const hostile = "\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\rOK \u202eevil\u202c \u2066x\u2069 \u009b31m\x7f\xff" +
	"\n12:00:00.000 hook Bash allow chmod -R 777 /"

// forged is the line the newline in hostile would forge.
const forged = "hook Bash allow chmod -R 777 /"

// TestHostileTextRendered: text an agent controls — a command and its
// output, a plugin call's arguments, a Claude Code tool's name and input, a
// model's name and words — goes through a real gateway, and every command
// that shows it to a person is run as a person runs it. What the terminal
// receives is checked byte for byte: valid UTF-8, no control or format
// character, no forged line, the hostile text visible as escapes; and JSON
// output is what it was.
func TestHostileTextRendered(t *testing.T) {
	script := filepath.Join(t.TempDir(), "turns.yaml")
	turns, _ := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"say": "I will print something. " + hostile, "tools": []any{
			map[string]any{"name": "exec", "input": map[string]any{"argv": []string{"printf", "%s\\n", hostile}}}}},
		map[string]any{"say": "Done."},
	}})
	// YAML reads JSON, and the characters it refuses raw as \u escapes.
	if err := os.WriteFile(script, textsafe.JSON(turns), 0o600); err != nil {
		t.Fatal(err)
	}
	e := NewWith(t, Extra{
		Gateway:   fmt.Sprintf("  models:\n    evil: {api: anthropic, kind: scripted, script: %s}\n", script),
		Top:       "plugins:\n  echo: {kind: builtin, builtin: toolgate-echo}\n",
		AgentKeys: "    tools: [echo]\n    model: {providers: [evil]}\n    askTimeout: 60s\n",
	}, "render")
	a := e.Agents[0]
	e.WriteConfig(`      - name: ask-echo
        ask: 'tool == "echo" && "ask-me" in args.argv'
        reason: a person reads this one
`)
	if _, err := e.Daemon.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	const session = "render-session"
	sess := e.Admin.WithSession(session)
	ctx := t.Context()

	// An exec in the session whose argument is hostile, running the echo
	// plugin with it (a plugin call under the exec) and printing it.
	res, err := sess.Call(ctx, a, "exec", map[string]any{"argv": []string{"sh", "-c", `/tools/bin/echo "$1"; printf '%s\n' "$1"`, "sh", hostile}}, nil, nil)
	if err != nil || *res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	// Claude Code's gate with a hostile tool name and command, in the session.
	hook, _ := json.Marshal(map[string]any{"session_id": session, "hook_event_name": "PreToolUse", "cwd": "/workspace",
		"tool_name": "Bash\x1b[2J\u202e", "tool_input": map[string]any{"command": hostile}, "tool_use_id": "toolu_1"})
	if res, err := e.Call(a, "exec", map[string]any{"argv": []string{"/tools/toolgate-client", "hook", "pre-tool-use"}, "stdin": string(hook)}); err != nil || *res.ExitCode != 0 {
		t.Fatalf("hook gate: %v %+v", err, res)
	}
	// A model request naming a hostile model, from inside the sandbox (its
	// arguments; usage counts the model the provider answered as).
	body, _ := json.Marshal(map[string]any{"model": hostile, "max_tokens": 16, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if _, err := e.Call(a, "exec", map[string]any{"argv": []string{"wget", "-q", "-O-", "--header", "Content-Type: application/json",
		"--post-data", string(body), "http://127.0.0.1:3129/evil/v1/messages"}}); err != nil {
		t.Fatalf("model request: %v", err)
	}
	// A call waiting for a person, its argument hostile.
	waiting := make(chan error, 1)
	go func() {
		_, err := e.Call(a, "exec", map[string]any{"argv": []string{"/tools/bin/echo", hostile, "ask-me"}})
		waiting <- err
	}()
	var askID string
	for deadline := time.Now().Add(time.Minute); askID == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the echo that asks never waited for a person")
		}
		ps, err := e.Admin.Approvals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			askID = p.ID
		}
		select {
		case err := <-waiting:
			t.Fatalf("the echo that asks ended unasked: %v", err)
		default:
		}
	}

	hookID := ""
	for _, en := range e.Entries(audit.Filter{Agent: a, Type: "hook"}) {
		hookID = en.ID
	}
	toolgate, _ := testenv.Binaries(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(toolgate, args...)
		cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
		out, err := cmd.Output()
		if err != nil && !strings.HasPrefix(strings.Join(args, " "), "agent ") {
			t.Fatalf("toolgate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, c := range []struct {
		args []string
		want string // the hostile text as it must appear ("" for none)
	}{
		{[]string{"audit", "tail", "-n", "100", "--agent", a}, `Bash\x1b[2J\u202e`},
		{[]string{"audit", "show", "--session", session}, `\x1b]0;pwned\x07`},
		{[]string{"audit", "show", hookID}, `\u001b]0;pwned\u0007\u001b]52;c;cm0gLXJmIH4=\u0007\rOK \u202eevil\u202c \u2066x\u2069 \u009b31m\u007f` + "\ufffd" + `\n12:00`},
		{[]string{"audit", "query", "--agent", a}, `\u001b]0;pwned\u0007`},
		{[]string{"approvals"}, `\x1b]0;pwned\x07`},
		{[]string{"approvals", "show", askID}, `\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\rOK \u202eevil\u202c \u2066x\u2069 \u009b31m\x7f` + "\ufffd" + `\n12:00`},
		{[]string{"usage", "--agent", a}, ""},
		{[]string{"policy", "replay", "--all", "--agent", a}, `Bash\x1b[2J\u202e`},
		{[]string{"agents"}, ""},
		{[]string{"agent", a, "--provider", "evil", "--max-steps", "3", "print something"}, `\x1b]0;pwned\x07`},
	} {
		name := strings.Join(c.args, " ")
		got := run(c.args...)
		t.Logf("toolgate %s:\n%s", name, got) // what a person reads (go test -v)
		if !utf8.ValidString(got) {
			t.Errorf("%s: not UTF-8:\n%q", name, got)
		}
		for i, r := range got {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
				(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
				t.Errorf("%s: %U reaches the terminal at byte %d:\n%q", name, r, i, got)
				break
			}
		}
		for _, l := range strings.Split(got, "\n") {
			// The transcript shows the model's words and a command's output
			// as lines, under the model's first line or behind a "│".
			shown := c.args[0] == "agent" && (strings.HasPrefix(l, "       ") || strings.HasPrefix(l, "      │ "))
			if strings.Contains(l, forged) && !strings.Contains(l, `\n12:00:00.000 `+forged) && !shown {
				t.Errorf("%s: a forged line: %q", name, l)
			}
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s does not show the hostile text as %q:\n%s", name, c.want, got)
		}
	}

	// JSON output is unchanged: the values as recorded, for programs.
	for _, args := range [][]string{{"audit", "tail", "-n", "100", "--agent", a, "--json"}, {"approvals", "--json"}} {
		if got := run(args...); !strings.Contains(got, "\u202eevil\u202c") || !strings.Contains(got, `\u001b]0;pwned\u0007`) {
			t.Errorf("%s changed: %s", strings.Join(args, " "), got)
		}
	}
	if err := e.Admin.Answer(ctx, askID, api.ApprovalAnswer{Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	<-waiting
	e.Verify()
}
