package agentloop

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/lib/textsafe"
)

// Transcript renders a run's events for a person at a terminal: what the
// model said (as it streams), each tool call with its decision and exit
// code, a progress line per step, and how the run ended. The model's words,
// its calls and what they gave back are the sandbox's to choose: every one
// is rendered by textsafe, so none reaches the terminal as a control
// sequence, and each call is one line of its own. Only the transcript
// writes at the second and fourth columns (a call's "→", its result's
// "✓"/"✗"): the model's further lines are indented under its first, and
// a call's output lines sit behind a "│", so neither can pass for a call
// or a decision.
type Transcript struct {
	W     io.Writer
	Agent string // for the hint on how to continue
	// KeysHere names the providers' key variables set in the caller's
	// environment (ANTHROPIC_API_KEY …). A scripted session then says that
	// the gateway, not this command, reads keys: a person who set one in
	// their shell and still got the script is told why.
	KeysHere []string
	inText   bool // the model's text is being written
	newLine  bool // … and its last character was a newline
	limits   *Limits
}

func (t *Transcript) endText() {
	if t.inText {
		fmt.Fprintln(t.W)
		t.inText, t.newLine = false, false
	}
}

// Event renders one event.
func (t *Transcript) Event(e Event) {
	switch e.Type {
	case "session":
		t.limits = e.Limits
		fmt.Fprintf(t.W, "session %s · agent %s · model %s via %s\n", textsafe.Line(e.Session), textsafe.Line(e.Agent),
			textsafe.Line(e.Model), textsafe.Line(e.Provider))
		if e.Scripted {
			fmt.Fprintln(t.W, "NOTE: this model is SCRIPTED — a fixed file of turns served by toolgate itself, not a real LLM.")
			if len(t.KeysHere) > 0 {
				verb := "is"
				if len(t.KeysHere) > 1 {
					verb = "are"
				}
				fmt.Fprintf(t.W, "      %s %s set in this shell, but keys are read by the gateway (its environment or\n", strings.Join(t.KeysHere, " and "), verb)
				fmt.Fprintf(t.W, "      HOME/secrets.yaml), and agent %s has no real provider with a key: docs/agents.md, \"Which model\".\n", e.Agent)
			} else {
				fmt.Fprintln(t.W, "      Set ANTHROPIC_API_KEY or OPENAI_API_KEY (see docs/agents.md) for a real model.")
			}
		}
		if e.Limits != nil {
			fmt.Fprintf(t.W, "limits: %d steps, %d tokens, %s\n", e.Limits.Steps, e.Limits.Tokens, e.Limits.Time)
		}
	case "text":
		if !t.inText {
			fmt.Fprint(t.W, "\nmodel: ")
			t.inText = true
		}
		t.text(textsafe.Text(e.Text))
	case "call":
		t.endText()
		fmt.Fprintf(t.W, "  → %s %s\n", textsafe.Line(e.Tool), argSummary(e.Args))
	case "result":
		t.endText()
		switch e.Decision {
		case "deny":
			fmt.Fprintf(t.W, "    ✗ denied by %s: %s%s\n", textsafe.Line(e.Rule), textsafe.Line(e.Reason), idNote(e.ID))
			return // the model gets the same words
		case "allow":
			status := "ok"
			if e.ExitCode != nil {
				status = fmt.Sprintf("exit %d", *e.ExitCode)
			}
			if e.IsError && e.ExitCode == nil {
				status = "failed"
			}
			fmt.Fprintf(t.W, "    ✓ allowed · %s%s\n", status, idNote(e.ID))
		default:
			fmt.Fprintf(t.W, "    ! %s\n", firstLine(e.Reason+" "+e.Output))
		}
		for _, l := range outputLines(e.Output, 4) {
			fmt.Fprintf(t.W, "      │ %s\n", l)
		}
	case "step":
		t.endText()
		steps := ""
		if t.limits != nil {
			steps = fmt.Sprintf("/%d", t.limits.Steps)
		}
		u := e.Usage
		fmt.Fprintf(t.W, "  [step %d%s · %d tokens in, %d out · %s]\n", e.Step, steps, u.Input+u.CacheRead+u.CacheWrite, u.Output, secs(e.Elapsed))
	case "stop":
		t.endText()
		tokens := int64(0)
		if e.Usage != nil {
			tokens = e.Usage.Total()
		}
		fmt.Fprintf(t.W, "\n%s after %d steps · %d tokens · %s\n", stopWords(e.Stop), e.Step, tokens, secs(e.Elapsed))
		if e.Error != "" {
			fmt.Fprintf(t.W, "  %s\n", textsafe.Line(e.Error))
		}
		fmt.Fprintf(t.W, "continue with: toolgate agent %s --continue %s \"next task\"\n", t.Agent, e.Session)
	}
}

// textIndent puts the model's further lines under its first, after "model: ".
const textIndent = "       "

// text writes a piece of the model's text, rendered, its lines after the
// first indented (pieces may end or begin anywhere in a line).
func (t *Transcript) text(s string) {
	for s != "" {
		if t.newLine {
			fmt.Fprint(t.W, textIndent)
			t.newLine = false
		}
		line, rest, nl := strings.Cut(s, "\n")
		fmt.Fprint(t.W, line)
		if nl {
			fmt.Fprintln(t.W)
			t.newLine = true
		}
		s = rest
	}
}

func stopWords(code string) string {
	switch code {
	case StopDone:
		return "done"
	case StopInterrupted:
		return "interrupted (the session is saved)"
	case StopDenied:
		return "stopped: the model door refused the request"
	case StopModelError:
		return "stopped: the model failed"
	}
	return "stopped at a limit (" + code + ")"
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func idNote(id string) string {
	if id == "" {
		return ""
	}
	return " · audit " + textsafe.Line(id)
}

// argSummary is a call's arguments in a line: the command, the path.
func argSummary(args json.RawMessage) string {
	var a struct {
		Command string   `json:"command"`
		Argv    []string `json:"argv"`
		Path    string   `json:"path"`
	}
	_ = json.Unmarshal(args, &a)
	switch {
	case a.Command != "":
		return clip(a.Command, 120)
	case len(a.Argv) > 0:
		return clip(strings.Join(a.Argv, " "), 120)
	case a.Path != "":
		return clip(a.Path, 120)
	}
	return clip(string(args), 120)
}

// outputLines is the start of what a call gave back: an exec's stdout and
// stderr, a read's text, or the result as it is; its lines rendered safe
// (a tab stays a tab).
func outputLines(out string, n int) []string {
	var r struct {
		Output struct {
			Stdout string `json:"stdout"`
			Stderr string `json:"stderr"`
			Path   string `json:"path"`
		} `json:"output"`
	}
	if json.Unmarshal([]byte(out), &r) == nil {
		if r.Output.Stdout == "" && r.Output.Stderr == "" {
			return nil // a write's or patch's result: the call line says it
		}
		out = r.Output.Stdout + r.Output.Stderr
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if len(lines) == n {
			lines = append(lines, "…")
			break
		}
		head, cut := textsafe.Cut(l, 160)
		line := textsafe.Text(head)
		if cut > 0 {
			line += "…"
		}
		lines = append(lines, line)
	}
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	return lines
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return clip(s, 160)
}

// clip is s in one line of at most n bytes, rendered safe.
func clip(s string, n int) string {
	line, _ := textsafe.Clip(s, n)
	return line
}
