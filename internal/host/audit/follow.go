package audit

import (
	"context"
	"log/slog"
	"time"
)

// A follower keeps a copy of the log caught up: the index (auditindex),
// the fleet's database (auditpg). Both run the same loop, Follow.
type FollowOptions struct {
	// What names the copy in log lines ("audit index").
	What string
	Log  *slog.Logger
	// Every is the poll; Kick, when set, asks for a catch-up at once.
	Every time.Duration
	Kick  <-chan struct{}
	// Step is one catch-up; it records its own Progress.
	Step func(ctx context.Context) error
}

// Backoff bounds the wait between attempts while a copy keeps failing.
const (
	minBackoff = 250 * time.Millisecond
	MaxBackoff = 30 * time.Second
)

// Follow runs o.Step every poll, and at once when o.Kick receives, until
// ctx ends. A failing copy is logged once per outage and retried with a
// growing backoff; the log keeps every entry meanwhile, so no call waits
// for a copy.
func Follow(ctx context.Context, o FollowOptions) {
	wait, down := o.Every, false
	for {
		err := o.Step(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !down {
				o.Log.Warn(o.What+" failing; the log keeps every entry and the copy catches up once it works", "err", err)
				down = true
			}
			wait = min(max(wait*2, minBackoff), MaxBackoff)
		default:
			if down {
				o.Log.Info(o.What + " working again; caught up")
				down = false
			}
			wait = o.Every
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-o.Kick:
			t.Stop()
		}
	}
}
