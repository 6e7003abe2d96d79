package approval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

func askCall(id, args string) *gateway.Call {
	return &gateway.Call{ID: id, Agent: "a", Tool: "exec", Kind: gateway.KindCore, Args: json.RawMessage(args), Command: "touch x"}
}

var asking = gateway.Decision{Ask: true, Rule: "ask-touch", Reason: "needs a person"}

// await runs Await in the background and returns its result channel once
// the call is listed as waiting.
func await(t *testing.T, s *Store, ctx context.Context, c *gateway.Call, timeout time.Duration) <-chan gateway.Approval {
	t.Helper()
	out := make(chan gateway.Approval, 1)
	go func() { out <- s.Await(ctx, c, asking, timeout) }()
	for range 200 {
		for _, p := range s.List() {
			if p.ID == c.ID {
				return out
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("call %s never listed", c.ID)
	return nil
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	s := New(nil)
	ctx := context.Background()

	ch := await(t, s, ctx, askCall("1", `{"command":"touch x"}`), time.Minute)
	if p := s.List()[0]; p.Rule != "ask-touch" || p.Command != "touch x" || p.Digest == "" || p.Deadline.Sub(p.Asked) != time.Minute {
		t.Errorf("pending %+v", p)
	}
	if err := s.Answer("1", Answer{Approve: true, By: "admin token t1", Reason: "fine"}); err != nil {
		t.Fatal(err)
	}
	if a := <-ch; !a.Allow || a.Outcome != "approved" || a.By != "admin token t1" || a.Reason != "approved by admin token t1: fine" {
		t.Errorf("approve: %+v", a)
	}
	if err := s.Answer("1", Answer{Approve: true}); !errors.Is(err, ErrNotFound) {
		t.Errorf("second answer: %v", err)
	}

	ch = await(t, s, ctx, askCall("2", `{}`), time.Minute)
	if err := s.Answer("2", Answer{By: "admin", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	if a := <-ch; a.Allow || a.Outcome != "denied" || a.Reason != "denied by admin: not today" {
		t.Errorf("deny: %+v", a)
	}

	start := time.Now()
	if a := s.Await(ctx, askCall("3", `{}`), asking, 50*time.Millisecond); a.Allow || a.Outcome != "timeout" || time.Since(start) < 50*time.Millisecond {
		t.Errorf("timeout: %+v", a)
	}
	// The caller's deadline bounds the wait, and the denial comes first.
	dctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	if a := s.Await(dctx, askCall("4", `{}`), asking, time.Minute); a.Outcome != "timeout" || dctx.Err() != nil {
		t.Errorf("caller deadline: %+v (ctx %v)", a, dctx.Err())
	}
	if len(s.List()) != 0 {
		t.Errorf("left waiting: %+v", s.List())
	}
}

// TestStanding: --for keeps an approval for the rule; --same-args only for
// identical arguments (spelled in any key order); never for another agent.
func TestStanding(t *testing.T) {
	t.Parallel()
	s := New(nil)
	ctx := context.Background()
	ch := await(t, s, ctx, askCall("1", `{"command":"touch x","cwd":"a"}`), time.Minute)
	if err := s.Answer("1", Answer{Approve: true, By: "admin", For: time.Hour, SameArgs: true}); err != nil {
		t.Fatal(err)
	}
	<-ch
	if a := s.Await(ctx, askCall("2", `{"cwd":"a", "command":"touch x"}`), asking, 20*time.Millisecond); !a.Allow || a.Outcome != "standing" {
		t.Errorf("same args: %+v", a)
	}
	if a := s.Await(ctx, askCall("3", `{"command":"touch y"}`), asking, 20*time.Millisecond); a.Allow {
		t.Errorf("different args reused the approval: %+v", a)
	}
	other := askCall("4", `{"command":"touch x","cwd":"a"}`)
	other.Agent = "b"
	if a := s.Await(ctx, other, asking, 20*time.Millisecond); a.Allow {
		t.Errorf("another agent reused the approval: %+v", a)
	}
	if err := s.Answer("x", Answer{Approve: false, For: time.Hour}); err == nil {
		t.Error("a standing denial accepted")
	}
}

func TestCloseDeniesWaiting(t *testing.T) {
	t.Parallel()
	s := New(nil)
	ch := await(t, s, context.Background(), askCall("1", `{}`), time.Minute)
	s.Close()
	if a := <-ch; a.Allow || a.Outcome != "shutdown" {
		t.Errorf("after close: %+v", a)
	}
	if a := s.Await(context.Background(), askCall("2", `{}`), asking, time.Minute); a.Allow || a.Outcome != "shutdown" {
		t.Errorf("ask after close: %+v", a)
	}
}

func TestMaxPending(t *testing.T) {
	t.Parallel()
	s := New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range MaxPending {
		await(t, s, ctx, askCall(string(rune('A'+i)), `{}`), time.Minute)
	}
	if a := s.Await(ctx, askCall("over", `{}`), asking, time.Minute); a.Allow || a.Outcome != "refused" {
		t.Errorf("over the cap: %+v", a)
	}
}

// TestSameArgsBindsEveryByte: a standing approval for the same arguments
// is for the same input too, and for no other number, kind or tool.
func TestSameArgsBindsEveryByte(t *testing.T) {
	t.Parallel()
	s := New(nil)
	ctx := context.Background()
	apply := func(id, args, input string) *gateway.Call {
		c := &gateway.Call{ID: id, Agent: "a", Kind: gateway.KindTool, Tool: "apply", Args: json.RawMessage(args)}
		if input != "" {
			c.Input = []byte(input)
		}
		return c
	}
	ch := await(t, s, ctx, apply("1", `{"argv":["-"],"n":9007199254740993}`, "harmless\n"), time.Minute)
	if err := s.Answer("1", Answer{Approve: true, By: "admin", For: time.Hour, SameArgs: true}); err != nil {
		t.Fatal(err)
	}
	<-ch
	if a := s.Await(ctx, apply("2", `{ "n":9007199254740993, "argv":["-"] }`, "harmless\n"), asking, 20*time.Millisecond); !a.Allow || a.Outcome != "standing" {
		t.Errorf("the same call: %+v", a)
	}
	for _, c := range []*gateway.Call{
		apply("3", `{"argv":["-"],"n":9007199254740993}`, "rm -rf /\n"), // other input
		apply("4", `{"argv":["-"],"n":9007199254740993}`, ""),           // no input
		apply("5", `{"argv":["-"],"n":9007199254740992}`, "harmless\n"), // a number a float64 would not tell apart
		{ID: "6", Agent: "a", Kind: gateway.KindHook, Tool: "apply", Args: json.RawMessage(`{"argv":["-"],"n":9007199254740993}`), Input: []byte("harmless\n")},
	} {
		if a := s.Await(ctx, c, asking, 20*time.Millisecond); a.Allow {
			t.Errorf("call %s reused the approval: %+v", c.ID, a)
		}
	}
}

type redactor struct{ secret string }

func (r redactor) Redact(args json.RawMessage) json.RawMessage {
	return json.RawMessage(r.RedactText(string(args)))
}
func (r redactor) RedactText(s string) string { return strings.ReplaceAll(s, r.secret, "[REDACTED]") }

// TestShownWholeAndRedacted: a person is shown every fact of a waiting call
// with its secrets redacted; a list shortens only the input, and says by
// how much; Get shows all of it.
func TestShownWholeAndRedacted(t *testing.T) {
	t.Parallel()
	const secret = "tok-4711-secret"
	s := New(redactor{secret})
	long := "echo " + strings.Repeat("a", 200) + " " + secret + " && rm -rf ~"
	input := []byte(strings.Repeat("line\n", 2000) + secret + "\xff")
	c := &gateway.Call{ID: "1", Agent: "a", Kind: gateway.KindCore, Tool: "exec", Args: json.RawMessage(`{"command":"` + long + `"}`),
		Command: long, Argv: []string{"sh", "-c", long}, Input: input}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	await(t, s, ctx, c, time.Minute)
	listed := s.List()[0]
	full, err := s.Get("1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Pending{listed, full} {
		b, _ := json.Marshal(p)
		if strings.Contains(string(b), secret) || strings.Contains(string(p.Input.Data), secret) {
			t.Errorf("the secret is shown: %s", b)
		}
		if !strings.HasSuffix(p.Command, "[REDACTED] && rm -rf ~") || !strings.HasSuffix(p.Argv[2], "&& rm -rf ~") || !strings.Contains(p.Args, "&& rm -rf ~") {
			t.Errorf("the command's tail is not shown: %q %q %q", p.Command, p.Argv, p.Args)
		}
		if p.Input.Bytes != len(input) || p.Digest != Digest(c) {
			t.Errorf("input %d bytes, digest %s", p.Input.Bytes, p.Digest)
		}
	}
	if len(listed.Input.Data) != ListInput || listed.Input.Cut != len(full.Input.Data)-ListInput || full.Input.Cut != 0 ||
		!strings.HasSuffix(string(full.Input.Data), "[REDACTED]\xff") {
		t.Errorf("listed %d bytes cut %d; full %d bytes cut %d", len(listed.Input.Data), listed.Input.Cut, len(full.Input.Data), full.Input.Cut)
	}
	if _, err := s.Get("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of no call: %v", err)
	}
}
