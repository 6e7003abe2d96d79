package approval

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/gateway"
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
	s := New()
	ctx := context.Background()

	ch := await(t, s, ctx, askCall("1", `{"command":"touch x"}`), time.Minute)
	if p := s.List()[0]; p.Rule != "ask-touch" || p.Command != "touch x" || p.ArgsHash == "" || p.Deadline.Sub(p.Asked) != time.Minute {
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
	s := New()
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
	s := New()
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
	s := New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range MaxPending {
		await(t, s, ctx, askCall(string(rune('A'+i)), `{}`), time.Minute)
	}
	if a := s.Await(ctx, askCall("over", `{}`), asking, time.Minute); a.Allow || a.Outcome != "refused" {
		t.Errorf("over the cap: %+v", a)
	}
}
