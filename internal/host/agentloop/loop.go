// Package agentloop is toolgate's own agent loop (`toolgate agent`): a
// model ↔ tools loop in the gateway's process. Each model request goes
// through the model door (decided, budgeted and recorded like a
// sandbox's); the model is offered exactly the tools the MCP door offers
// the agent, with the same schemas; each tool call it makes goes through
// Gateway.Handle, and whatever the pipeline says — a denial with its rule
// and reason, bad arguments, a failure — goes back to the model as a tool
// error, and the loop goes on. Limits on steps, tokens and wall time stop
// it with the reason; so does a cancelled context (Ctrl-C). Everything it
// does carries the session id; a tool call's parent is the tool_use id the
// model call's result entry lists. The conversation is saved after every
// step, so a session can be continued.
package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/host/door/mcp"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
)

// Via is the entry point recorded on the loop's tool calls.
const Via = "agent"

// Model sends model requests through the model door (*modeldoor.Door):
// its answer is what the provider's client would get, or the door's
// refusal in the provider's error shape, with Toolgate-Rule set.
type Model interface {
	Send(ctx context.Context, r *modeldoor.Request) (*http.Response, error)
}

var _ Model = (*modeldoor.Door)(nil)

// Gateway is the pipeline the tool calls go through (*gateway.Gateway).
type Gateway interface {
	Handle(ctx context.Context, call *gateway.Call, io *gateway.Streams) (*gateway.Result, error)
	Snapshot() *gateway.Snapshot
}

// Skills are the skill:// resources an agent sees (*mcp.Door).
type Skills interface {
	Skills(agent string) []mcp.Skill
	ReadSkill(agent, uri string) (string, error)
}

var _ Skills = (*mcp.Door)(nil)

// Limits bound one run of the loop. Zero fields take the defaults.
type Limits struct {
	Steps     int           `json:"steps,omitempty"`     // model answers
	Tokens    int64         `json:"tokens,omitempty"`    // every token the answers report
	Time      time.Duration `json:"time,omitempty"`      // wall time
	MaxTokens int64         `json:"maxTokens,omitempty"` // max_tokens of each request
}

// Default limits.
const (
	DefaultSteps     = 50
	DefaultTokens    = 2_000_000
	DefaultTime      = 30 * time.Minute
	DefaultMaxTokens = 8192
)

func (l Limits) withDefaults() Limits {
	if l.Steps <= 0 {
		l.Steps = DefaultSteps
	}
	if l.Tokens <= 0 {
		l.Tokens = DefaultTokens
	}
	if l.Time <= 0 {
		l.Time = DefaultTime
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = DefaultMaxTokens
	}
	return l
}

// How a run ends (Event.Stop).
const (
	StopDone        = "done"         // the model answered without asking for a tool
	StopSteps       = "limit.steps"  // the step limit
	StopTokens      = "limit.tokens" // the token limit
	StopTime        = "limit.time"   // the wall time limit
	StopInterrupted = "interrupted"  // the caller went away (Ctrl-C)
	StopDenied      = "model.denied" // the model door refused the request (budget, allowlist, rule)
	StopModelError  = "model.error"  // the provider failed or answered something unreadable
)

// Event is one thing the loop reports as it works; `toolgate agent`
// renders them, --json prints them.
type Event struct {
	Type string `json:"type"` // session, text, step, call, result, stop

	Session  string `json:"session,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Scripted bool   `json:"scripted,omitempty"` // the model is a script served by toolgate
	Step     int    `json:"step,omitempty"`
	Text     string `json:"text,omitempty"` // text: a piece of what the model said

	Tool      string          `json:"tool,omitempty"`
	ToolUseID string          `json:"toolUseId,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	ID        string          `json:"id,omitempty"`       // the call's audit id
	Decision  string          `json:"decision,omitempty"` // allow, deny, error
	Rule      string          `json:"rule,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	ExitCode  *int            `json:"exitCode,omitempty"`
	Output    string          `json:"output,omitempty"` // result: what the model got, cut for display
	IsError   bool            `json:"isError,omitempty"`

	Usage   *model.Usage `json:"usage,omitempty"`   // step, stop: the run's tokens so far
	Elapsed float64      `json:"elapsed,omitempty"` // seconds since the run began
	Limits  *Limits      `json:"limits,omitempty"`  // session: the limits in force

	Stop  string `json:"stop,omitempty"`  // stop: how the run ended
	Error string `json:"error,omitempty"` // stop: why, when it is not done
}

// Run is one run of the loop on a session.
type Run struct {
	Model    Model
	Gateway  Gateway
	Skills   Skills // nil: none
	Store    *Store
	Visible  []string // the tool names the agent may see (its core tools and plugin allowlist)
	Limits   Limits
	Stream   bool // ask for streamed answers
	Scripted bool // say so on every session event
	Emit     func(Event)
}

// displayOutput bounds what an event carries of a tool result; the model
// gets all of it.
const displayOutput = 4 << 10

var errTimeLimit = errors.New("the run's wall time limit was reached")

// Do runs the loop on sess until the model is done or a limit, the
// caller, or the door stops it. task, when not empty, is the next user
// message. It returns the stop event (also emitted).
func (r *Run) Do(ctx context.Context, sess *Session, task string) Event {
	lim := r.Limits.withDefaults()
	start := time.Now()
	emit := func(e Event) Event {
		e.Session = sess.ID
		if e.Type == "stop" || e.Type == "step" {
			e.Elapsed = time.Since(start).Seconds()
		}
		if r.Emit != nil {
			r.Emit(e)
		}
		return e
	}
	emit(Event{Type: "session", Agent: sess.Agent, Provider: sess.Provider, Model: sess.Model, Scripted: r.Scripted, Limits: &lim})
	var usage model.Usage
	stop := func(code string, err error) Event {
		sess.Stop = code
		e := Event{Type: "stop", Stop: code, Usage: &usage, Step: sess.Steps}
		if err != nil {
			e.Error = err.Error()
		}
		if serr := r.Store.Save(sess); serr != nil && e.Error == "" {
			e.Error = "saving the session: " + serr.Error()
		}
		return emit(e)
	}
	if !r.Store.claim(sess.ID) {
		return emit(Event{Type: "stop", Stop: StopModelError, Error: fmt.Sprintf("session %s is running already", sess.ID)})
	}
	defer r.Store.release(sess.ID)

	if task != "" {
		sess.Messages = append(sess.Messages, Message{Role: "user", Text: task})
	}
	if n := len(sess.Messages); n == 0 || sess.Messages[n-1].Role != "user" {
		return stop(StopDone, errors.New("nothing to do: the session's last turn is the model's; give a task to continue it"))
	}
	ctx, cancel := context.WithTimeoutCause(ctx, lim.Time, errTimeLimit)
	defer cancel()

	var skills []mcp.Skill
	if r.Skills != nil {
		skills = r.Skills.Skills(sess.Agent)
	}
	tools := buildTools(r.Gateway.Snapshot(), r.Visible, len(skills) > 0)
	system := systemPrompt(sess.Agent, skills)

	for step := 0; ; step++ {
		if err := ended(ctx); err != nil {
			return stop(stopOf(ctx), err)
		}
		switch {
		case step >= lim.Steps:
			return stop(StopSteps, fmt.Errorf("the run took %d steps, its limit", lim.Steps))
		case usage.Total() >= lim.Tokens:
			return stop(StopTokens, fmt.Errorf("the run used %d tokens, over its limit of %d", usage.Total(), lim.Tokens))
		}
		turn, code, err := r.ask(ctx, sess, lim, system, tools.offers)
		addUsage(&usage, turn.Outcome.Usage)
		addUsage(&sess.Usage, turn.Outcome.Usage)
		if err != nil {
			if ctx.Err() != nil {
				return stop(stopOf(ctx), ended(ctx))
			}
			return stop(code, err)
		}
		sess.Steps++
		sess.Messages = append(sess.Messages, Message{Role: "assistant", Text: turn.Text, Calls: turn.Calls})
		u := usage
		emit(Event{Type: "step", Step: sess.Steps, Usage: &u, Reason: turn.Outcome.StopReason})
		if len(turn.Calls) == 0 {
			return stop(StopDone, nil)
		}
		results := make([]ToolResult, 0, len(turn.Calls))
		for _, c := range turn.Calls {
			results = append(results, r.call(ctx, sess, tools, c, emit))
		}
		sess.Messages = append(sess.Messages, Message{Role: "user", Results: results})
		if err := r.Store.Save(sess); err != nil {
			return stop(StopModelError, fmt.Errorf("saving the session: %w", err))
		}
	}
}

func addUsage(dst *model.Usage, u model.Usage) {
	dst.Input += u.Input
	dst.Output += u.Output
	dst.CacheRead += u.CacheRead
	dst.CacheWrite += u.CacheWrite
}

// ended is why ctx ended, nil while it runs.
func ended(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	if c := context.Cause(ctx); errors.Is(c, errTimeLimit) {
		return c
	}
	return errors.New("interrupted")
}

func stopOf(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), errTimeLimit) {
		return StopTime
	}
	return StopInterrupted
}

// ask sends the conversation and reads the model's answer.
func (r *Run) ask(ctx context.Context, sess *Session, lim Limits, system string, offers []Offer) (Turn, string, error) {
	body, err := requestBody(sess.API, sess.Model, lim.MaxTokens, r.Stream, system, offers, sess.Messages)
	if err != nil {
		return Turn{}, StopModelError, err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if sess.API == model.Anthropic {
		h.Set("Anthropic-Version", "2023-06-01")
	}
	resp, err := r.Model.Send(ctx, &modeldoor.Request{Agent: sess.Agent, Session: sess.ID, Provider: sess.Provider,
		Path: apiPath(sess.API), Header: h, Body: body})
	if err != nil {
		return Turn{}, StopModelError, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg := errorMessage(b)
		if rule := resp.Header.Get(modeldoor.HeaderRule); rule != "" {
			return Turn{}, StopDenied, fmt.Errorf("%s (rule %s)", msg, rule)
		}
		return Turn{}, StopModelError, fmt.Errorf("the model provider answered %d: %s", resp.StatusCode, msg)
	}
	var onText func(string)
	if r.Emit != nil {
		onText = func(s string) { r.Emit(Event{Type: "text", Session: sess.ID, Text: s}) }
	}
	t, err := readTurn(sess.API, resp.Header.Get("Content-Type"), resp.Body, onText)
	if err != nil {
		return t, StopModelError, err
	}
	return t, "", nil
}

// errorMessage is the message of a provider-shaped error body.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// call runs one tool call through the pipeline and turns what it said
// into the model's tool result.
func (r *Run) call(ctx context.Context, sess *Session, tools toolSet, c ToolCall, emit func(Event) Event) ToolResult {
	args := rawOrEmpty(c.Input)
	emit(Event{Type: "call", Tool: c.Name, ToolUseID: c.ID, Args: args})
	out := ToolResult{ID: c.ID}
	ev := Event{Type: "result", Tool: c.Name, ToolUseID: c.ID}
	defer func() {
		ev.Output, ev.IsError = cut(out.Content), out.IsError
		emit(ev)
	}()
	if ctx.Err() != nil {
		out.Content, out.IsError = "not run: the run was stopped", true
		ev.Decision = "error"
		return out
	}
	name, ok := tools.byName[c.Name]
	if !ok {
		// Still a call through the pipeline: an unknown tool is a recorded denial.
		name = c.Name
	}
	if name == SkillTool && r.Skills != nil {
		var a struct{ URI string }
		_ = json.Unmarshal(args, &a)
		text, err := r.Skills.ReadSkill(sess.Agent, a.URI)
		if err != nil {
			out.Content, out.IsError, ev.Decision = err.Error(), true, "error"
		} else {
			out.Content, ev.Decision = text, "allow"
		}
		return out
	}
	if !json.Valid(args) {
		args, _ = json.Marshal(map[string]string{"invalid_json": string(args)})
	}
	call := &gateway.Call{Agent: sess.Agent, Tool: name, Args: args, Session: sess.ID, Parent: c.ID, Via: Via}
	res, err := r.Gateway.Handle(ctx, call, nil)
	ev.ID = call.ID
	var denied *gateway.DeniedError
	switch {
	case errors.As(err, &denied):
		ev.Decision, ev.Rule, ev.Reason = "deny", denied.Decision.Rule, denied.Decision.Reason
	case err != nil:
		ev.Decision, ev.Reason = "error", err.Error()
	default:
		ev.Decision = "allow"
		if res != nil {
			ev.ExitCode = res.ExitCode
		}
	}
	out.Content, out.IsError = resultText(call, res, err)
	return out
}

func cut(s string) string {
	if len(s) <= displayOutput {
		return s
	}
	return s[:displayOutput] + "…"
}

// systemPrompt tells the model where it is and what it may read.
func systemPrompt(agent string, skills []mcp.Skill) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are agent %q, working in a sandbox through toolgate. Your workspace is /workspace; relative paths are relative to it. ", agent)
	b.WriteString("Use the tools to read, write and patch files and run commands. Every tool call is decided by policy and recorded: " +
		"a denied call comes back as an error with the rule and the reason — do not try to get around it; do the task another way or say why you cannot. " +
		"When the task is done, answer with a short summary and no tool call.")
	if len(skills) > 0 {
		fmt.Fprintf(&b, "\n\nSkills you can read with the %s tool:\n", SkillTool)
		for _, s := range skills {
			fmt.Fprintf(&b, "- %s: %s\n", s.URI, s.Description)
		}
	}
	return b.String()
}
