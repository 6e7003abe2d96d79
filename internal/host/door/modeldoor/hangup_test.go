package modeldoor

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/model"
)

// hangUp sends a streamed request and closes it after the first line of
// the answer, as a client that hangs up on purpose does; it returns the
// status.
func (h *harness) hangUp(t *testing.T, provider, path, body string) int {
	t.Helper()
	resp := h.post(t, "demo", provider, path, body)
	if resp.StatusCode != 200 {
		return resp.StatusCode
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A budget holds whatever the client does. Eight streamed requests hung up
// after their first event, each answer 50,160 tokens by the fake
// provider's bill, against 60,000 tokens an hour: the door reads each
// answer on to its usage, counts what the provider billed, and refuses
// the third request. (Before, all eight were allowed and counted 0.)
func TestHangUpsAreCounted(t *testing.T) {
	for _, c := range []struct{ provider, path string }{
		{"anthropic", "/v1/messages"},
		{"openai", "/v1/chat/completions"},
		{"openai", "/v1/responses"},
	} {
		t.Run(c.path, func(t *testing.T) {
			h := newHarness(t, `providers: [anthropic, openai], budget: {tokensPerHour: 60000}`)
			h.fake.Chunks, h.fake.PerChunk, h.fake.Gap = 100, 500, 2*time.Millisecond
			allowed := 0
			for i := range 8 {
				switch status := h.hangUp(t, c.provider, c.path, `{"model":"fake-slow","max_tokens":64000,"stream":true,"messages":[]}`); status {
				case 200:
					allowed++
					h.waitResults(t, allowed)
				case http.StatusForbidden:
				default:
					t.Fatalf("request %d: %d", i, status)
				}
			}
			h.waitUpstreamOver(t)
			counted, billed := h.meter.Spent("demo", time.Now()).Tokens1h, h.fake.Billed()
			t.Logf("8 hang-ups: %d allowed, %d tokens counted, %d billed by the provider", allowed, counted, billed)
			if allowed != 2 || counted != billed || billed != 2*(50000+160) {
				t.Fatalf("%d allowed; counted %d, billed %d", allowed, counted, billed)
			}
			for _, e := range h.waitResults(t, allowed) {
				if e.Detail["usage"] != "measured" || !strings.Contains(e.Error, "client went away") {
					t.Fatalf("%+v", e)
				}
			}
			if last := h.last(t); last.Decision != "deny" || last.Rule != model.RuleTokens {
				t.Fatalf("%+v", last)
			}
		})
	}
}

// A non-streamed request whose client leaves before the answer: the door
// waits for the answer all the same and counts it.
func TestHangUpBeforeTheAnswer(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Chunks, h.fake.PerChunk, h.fake.Gap = 100, 500, 2*time.Millisecond // the answer after 0.2 s
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://toolgate/v1/model/anthropic/v1/messages", strings.NewReader(`{"model":"fake-slow","max_tokens":64000}`))
	done := make(chan error, 1)
	go func() {
		resp, err := h.client("demo").Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for len(h.fake.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the client got its answer before it hung up")
	}
	e := h.waitResults(t, 1)[0]
	h.waitUpstreamOver(t)
	counted, billed := h.meter.Spent("demo", time.Now()).Tokens1h, h.fake.Billed()
	if e.Detail["usage"] != "measured" || counted != billed || billed != 50160 {
		t.Fatalf("counted %d, billed %d: %+v", counted, billed, e)
	}
}

// When the answer does not end within the door's bounds after the client
// left (time, then bytes), the door cuts it and charges an estimate: the
// input the stream reported, and the request's output limit — at least
// what the provider billed for the part it generated.
func TestHangUpCharged(t *testing.T) {
	for _, c := range []struct {
		name   string
		bound  func(*Tool)
		reason string
	}{
		{"time", func(tl *Tool) { tl.drainTime = 100 * time.Millisecond }, "did not end within 100ms of the client leaving"},
		{"bytes", func(tl *Tool) { tl.drainBytes = 2000 }, "ran on for more than 2000 bytes after the client left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, "")
			c.bound(h.tool)
			h.fake.Chunks, h.fake.PerChunk, h.fake.Gap = 400, 500, 10*time.Millisecond // 200,000 tokens over 4 s
			if status := h.hangUp(t, "anthropic", "/v1/messages", `{"model":"fake-slow","max_tokens":64000,"stream":true,"messages":[]}`); status != 200 {
				t.Fatal(status)
			}
			e := h.waitResults(t, 1)[0]
			h.waitUpstreamOver(t)
			counted, billed := h.meter.Spent("demo", time.Now()).Tokens1h, h.fake.Billed()
			t.Logf("cut after the client left (%s): %d tokens counted, %d billed by the provider", c.name, counted, billed)
			if e.Detail["usage"] != "estimated" || num(e.Detail["estimatedTokens"]) != 120+40+64000 || counted != 64160 || counted < billed || !strings.Contains(e.Error, c.reason) {
				t.Fatalf("counted %d, billed %d: %+v", counted, billed, e)
			}
			if h.fake.Requests()[0].Finished {
				t.Fatal("the upstream was read to its end")
			}
		})
	}
}

// waitUpstreamOver waits until the fake provider stopped answering every
// request: its bill is final.
func (h *harness) waitUpstreamOver(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		over := true
		for _, r := range h.fake.Requests() {
			over = over && r.Over
		}
		if over {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake provider is still answering")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
