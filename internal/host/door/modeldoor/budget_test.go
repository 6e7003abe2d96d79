package modeldoor

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/fakeprovider"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/session"
)

// TestTaskBudget: a task's cost cap, hit by model requests sent at once.
// Each request holds what it could cost (its max_tokens and its body,
// priced) while it runs, so the cap admits only as many as it has room
// for — overshooting by at most one request's hold — and the rest wait
// for a person: one denied (a provider-shaped error), one approved with a
// raised cap, after which the task's requests run without asking.
func TestTaskBudget(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Chunks, h.fake.Gap = 5, 60*time.Millisecond // each answer takes ~0.3 s: the requests overlap
	tracker, store := session.New(), approval.New(nil)
	door := New(gateway.New(gateway.Options{Audit: h.aw, Approvals: store, Sessions: tracker}, h.gw.Snapshot()))
	body := `{"model":"` + fakeprovider.ModelSlow + `","max_tokens":1000,"messages":[{"role":"user","content":"count to five"}]}`
	// What one request holds: its output limit and its body's input, priced.
	hold := (float64(len(body)+3)/4*3 + 1000*15) / 1e6
	const budget = 0.05
	end, err := tracker.Open("demo", "task-1", "cost=0.05")
	if err != nil {
		t.Fatal(err)
	}
	defer end()

	type answer struct {
		status int
		body   string
	}
	send := func() answer {
		resp, err := door.Send(context.Background(), &Request{Agent: "demo", Provider: "anthropic", Path: "/v1/messages", Session: "task-1",
			Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)})
		if err != nil {
			return answer{0, err.Error()}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, string(b)}
	}
	const parallel = 8
	answers := make(chan answer, parallel)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() { answers <- send() })
	}
	admitted := int(math.Ceil(budget / hold)) // while cost + held < cap
	var pending []approval.Pending
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if pending = store.List(); len(pending) == parallel-admitted {
			break
		}
	}
	if len(pending) != parallel-admitted {
		t.Fatalf("%d requests wait for a person, want %d (%d fit under $%.2f holding $%.4f each)", len(pending), parallel-admitted, admitted, budget, hold)
	}
	for _, p := range pending {
		if p.Rule != session.RuleBudgetCost || !strings.Contains(p.Reason, "of its $0.05") {
			t.Fatalf("pending %+v", p)
		}
	}
	if got := len(h.fake.Requests()); got > admitted {
		t.Fatalf("%d requests reached the provider, more than the %d the cap had room for", got, admitted)
	}
	if held := float64(admitted) * hold; held-budget > hold {
		t.Fatalf("the cap was overshot by $%.4f, more than one request's $%.4f", held-budget, hold)
	}
	// One denied: the agent gets an error shaped like the provider's.
	if err := store.Answer(pending[0].ID, approval.Answer{By: "admin", Reason: "enough"}); err != nil {
		t.Fatal(err)
	}
	// One approved with a raised cap; the rest then approved as they are.
	if err := store.Answer(pending[1].ID, approval.Answer{Approve: true, By: "admin", Raise: "cost=1"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pending[2:] {
		if err := store.Answer(p.ID, approval.Answer{Approve: true, By: "admin"}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(answers)
	ok, refused := 0, 0
	for a := range answers {
		switch a.status {
		case http.StatusOK:
			ok++
		case http.StatusForbidden:
			refused++
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type, Message string
				} `json:"error"`
			}
			if json.Unmarshal([]byte(a.body), &e) != nil || e.Type != "error" || !strings.Contains(e.Error.Message, "session.budget.cost") && !strings.Contains(e.Error.Message, "the task (session task-1)") {
				t.Errorf("the refusal is not shaped like the provider's: %s", a.body)
			}
		default:
			t.Errorf("answer %d: %s", a.status, a.body)
		}
	}
	if ok != parallel-1 || refused != 1 {
		t.Fatalf("%d answered, %d refused; want %d and 1", ok, refused, parallel-1)
	}
	// Under the raised cap the task's requests run without asking.
	if a := send(); a.status != http.StatusOK || len(store.List()) != 0 {
		t.Fatalf("after the raise: %d %s", a.status, a.body)
	}
	var raised bool
	for _, e := range h.entries(t) {
		if ap, ok := e.Detail["approval"].(map[string]any); ok && e.Phase == gateway.PhaseDecision && ap["raise"] == "cost=1" && e.Rule == session.RuleBudgetCost {
			raised = true
		}
	}
	if !raised {
		t.Error("no decision entry records the raise")
	}
}
