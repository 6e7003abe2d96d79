package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestResync: an idle sandbox is brought in line at once; with a call in
// flight, later — new calls wait meanwhile — unless keep says nothing is
// cut; a second Resync meanwhile is pending too.
func TestResync(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	never := func() (bool, error) { return false, nil }
	var c Calls
	ensured := make(chan struct{}, 10)
	ensure := func(context.Context) error { ensured <- struct{}{}; return nil }

	if pending, err := c.Resync(ctx, never, ensure, time.Hour, log, "a"); pending || err != nil || len(ensured) != 1 {
		t.Fatalf("idle: pending %v, %v, ensured %d", pending, err, len(ensured))
	}
	<-ensured

	if err := c.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	if pending, err := c.Resync(ctx, func() (bool, error) { return true, nil }, ensure, time.Hour, log, "a"); pending || err != nil {
		t.Fatalf("kept: pending %v, %v", pending, err)
	}
	<-ensured
	failed := errors.New("cannot ask")
	if _, err := c.Resync(ctx, func() (bool, error) { return false, failed }, ensure, time.Hour, log, "a"); !errors.Is(err, failed) {
		t.Fatalf("keep failed: %v", err)
	}

	if pending, err := c.Resync(ctx, never, ensure, time.Hour, log, "a"); !pending || err != nil {
		t.Fatalf("a call in flight: pending %v, %v", pending, err)
	}
	if pending, _ := c.Resync(ctx, never, ensure, time.Hour, log, "a"); !pending {
		t.Fatal("a second Resync while one waits is not pending")
	}
	entered := make(chan error, 1)
	go func() { entered <- c.Enter(ctx) }()
	select {
	case <-ensured:
		t.Fatal("ensured under the call in flight")
	case <-entered:
		t.Fatal("a new call started while a recreate waits")
	case <-time.After(50 * time.Millisecond):
	}
	c.Leave()
	<-ensured
	if err := <-entered; err != nil {
		t.Fatal(err)
	}
	c.Leave()

	// The bound cuts a call that does not end.
	if err := c.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	if pending, _ := c.Resync(ctx, never, ensure, 10*time.Millisecond, log, "a"); !pending {
		t.Fatal("not pending")
	}
	select {
	case <-ensured:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain bound did not end the wait")
	}
	c.Leave()
}
