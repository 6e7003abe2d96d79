package modeldoor

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// askAll sends every call to a person.
type askAll struct{}

func (askAll) Decide(*gateway.Call) gateway.Decision {
	return gateway.Decision{Ask: true, Rule: "ask-model", Reason: "a person reads the prompt"}
}

// TestAskedModelCallBindsItsBody: a model call a rule sends to a person
// shows them the request body as it will be sent, and an approval for the
// same arguments binds it: another prompt of the same size (the recorded
// facts alike) waits for a person again.
func TestAskedModelCallBindsItsBody(t *testing.T) {
	h := newHarness(t, "")
	store := approval.New(nil)
	snap := *h.gw.Snapshot()
	snap.Decider = askAll{}
	door := New(gateway.New(gateway.Options{Audit: h.aw, Approvals: store}, &snap))
	send := func(prompt string) <-chan int {
		done := make(chan int, 1)
		go func() {
			resp, err := door.Send(context.Background(), &Request{Agent: "demo", Provider: "anthropic", Path: "/v1/messages",
				Header: http.Header{"Content-Type": {"application/json"}},
				Body:   []byte(`{"model":"fake-tool","max_tokens":5,"messages":[{"role":"user","content":"` + prompt + `"}]}`)})
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		return done
	}
	waiting := func(done <-chan int) (approval.Pending, bool) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if ps := store.List(); len(ps) > 0 {
				return ps[0], true
			}
			select {
			case status := <-done:
				t.Logf("answered %d without asking", status)
				return approval.Pending{}, false
			default:
			}
		}
		t.Fatal("nothing waited for a person")
		return approval.Pending{}, false
	}
	done := send("say hi")
	p, ok := waiting(done)
	if !ok || p.Input == nil || string(p.Input.Data) != `{"model":"fake-tool","max_tokens":5,"messages":[{"role":"user","content":"say hi"}]}` {
		t.Fatalf("the person is not shown the body: %+v", p.Input)
	}
	if err := store.Answer(p.ID, approval.Answer{Approve: true, By: "test", For: time.Hour, SameArgs: true}); err != nil {
		t.Fatal(err)
	}
	if status := <-done; status != 200 {
		t.Fatalf("the approved call: %d", status)
	}
	done = send("say ho")
	if p, ok := waiting(done); !ok {
		t.Error("another prompt ran on the approval of the first")
	} else if err := store.Answer(p.ID, approval.Answer{By: "test"}); err != nil {
		t.Fatal(err)
	}
	if status := <-send("say hi"); status != 200 {
		t.Errorf("the same prompt again: %d", status)
	}
}
