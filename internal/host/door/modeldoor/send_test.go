package modeldoor

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// Send with a context that ends before any answer returns the context's
// error at once: the door's own refusal, written into a pipe nobody reads
// any more, must not hold it (it did: Send waited for the writer, the
// writer for a reader).
func TestSendCancelled(t *testing.T) {
	h := newHarness(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		resp, err := h.door.Send(ctx, &Request{Agent: "demo", Provider: "anthropic", Path: "/v1/messages",
			Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"model":"fake-tool","max_tokens":5}`)})
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Send did not return after its context ended")
	}
}
