package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
)

// recorder makes services that note their starts and stops in order.
type recorder struct{ got []string }

func (r *recorder) service(name string, startErr, stopErr error) service {
	return service{name: name,
		start: func(context.Context) error { r.got = append(r.got, "start "+name); return startErr },
		stop:  func(context.Context) error { r.got = append(r.got, "stop "+name); return stopErr }}
}

func newServices() services { return services{log: slog.New(slog.NewTextHandler(io.Discard, nil))} }

// Services start in order and stop in reverse; a part with only a start
// or only a stop takes its place in both orders.
func TestServicesStartInOrderStopInReverse(t *testing.T) {
	t.Parallel()
	var r recorder
	s := newServices()
	stopOnly := service{name: "c", stop: func(context.Context) error { r.got = append(r.got, "stop c"); return nil }}
	startOnly := service{name: "d", start: func(context.Context) error { r.got = append(r.got, "start d"); return nil }}
	if err := s.start(t.Context(), []service{r.service("a", nil, nil), r.service("b", nil, nil), stopOnly, startOnly, r.service("e", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "start d", "start e", "stop e", "stop c", "stop b", "stop a"}
	if !slices.Equal(r.got, want) {
		t.Fatalf("got %q, want %q", r.got, want)
	}
	r.got = nil
	if err := s.stop(t.Context()); err != nil || len(r.got) != 0 {
		t.Fatalf("a second stop: %v %q, want nothing stopped twice", err, r.got)
	}
}

// A start that fails stops the services already started, in reverse, not
// the one that failed nor those after it, and returns its error as it is.
func TestServicesRollBackAFailedStart(t *testing.T) {
	t.Parallel()
	var r recorder
	s := newServices()
	boom := errors.New("boom")
	err := s.start(t.Context(), []service{r.service("a", nil, nil), r.service("b", nil, errors.New("b's stop")), r.service("c", boom, nil), r.service("d", nil, nil)})
	if err != boom {
		t.Fatalf("start: %v, want the failed start's error", err)
	}
	want := []string{"start a", "start b", "start c", "stop b", "stop a"}
	if !slices.Equal(r.got, want) {
		t.Fatalf("got %q, want %q", r.got, want)
	}
	r.got = nil
	if err := s.stop(t.Context()); err != nil || len(r.got) != 0 {
		t.Fatalf("stop after a rollback: %v %q, want nothing stopped twice", err, r.got)
	}
}

// Stop stops every service even when some fail, and returns all errors.
func TestServicesStopEveryOne(t *testing.T) {
	t.Parallel()
	var r recorder
	s := newServices()
	e1, e3 := errors.New("one"), errors.New("three")
	if err := s.start(t.Context(), []service{r.service("1", nil, e1), r.service("2", nil, nil), r.service("3", nil, e3)}); err != nil {
		t.Fatal(err)
	}
	err := s.stop(t.Context())
	if !errors.Is(err, e1) || !errors.Is(err, e3) {
		t.Fatalf("stop: %v, want both errors", err)
	}
	if want := []string{"start 1", "start 2", "start 3", "stop 3", "stop 2", "stop 1"}; !slices.Equal(r.got, want) {
		t.Fatalf("got %q, want %q", r.got, want)
	}
}

// A task's end cancels its goroutine and returns once it has returned; an
// end without a run (a part that had nothing to run) returns at once.
func TestTaskEndWaitsForTheGoroutine(t *testing.T) {
	t.Parallel()
	var idle task
	if err := idle.end(t.Context()); err != nil {
		t.Fatal(err)
	}
	var tk task
	returned := false
	tk.run(func(ctx context.Context) {
		<-ctx.Done()
		returned = true
	})
	if err := tk.end(t.Context()); err != nil || !returned {
		t.Fatalf("end: %v, goroutine returned: %v", err, returned)
	}
}
