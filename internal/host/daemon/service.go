package daemon

import (
	"context"
	"errors"
	"log/slog"
	"slices"
)

// A service is one part of the running daemon with something to start or
// to stop: a lock taken, a file opened, a goroutine, listeners. The daemon
// is an ordered list of them (caddy's apps): started in order, stopped in
// reverse, and a start that fails stops the ones already started, in
// reverse, so that no part is left running and none is stopped twice.
type service struct {
	name  string                          // named in the log when its stop fails in a rollback
	start func(ctx context.Context) error // nil: nothing to start
	stop  func(ctx context.Context) error // nil: nothing to stop
}

// services are the ones started, in order.
type services struct {
	log     *slog.Logger
	started []service
}

// start starts list in order; when one fails, the ones started are stopped
// in reverse (each stop bounded by a context of rollback's own) and its
// error is returned.
func (s *services) start(ctx context.Context, list []service) error {
	for _, sv := range list {
		if sv.start != nil {
			if err := sv.start(ctx); err != nil {
				s.rollback()
				return err
			}
		}
		s.started = append(s.started, sv)
	}
	return nil
}

func (s *services) rollback() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, sv := range slices.Backward(s.started) {
		if sv.stop != nil {
			if err := sv.stop(ctx); err != nil {
				s.log.Warn("stopping after a failed start", "service", sv.name, "err", err)
			}
		}
	}
	s.started = nil
}

// stop stops the started services in reverse, every one even when some
// fail, and returns their errors.
func (s *services) stop(ctx context.Context) error {
	var errs []error
	for _, sv := range slices.Backward(s.started) {
		if sv.stop != nil {
			errs = append(errs, sv.stop(ctx))
		}
	}
	s.started = nil
	return errors.Join(errs...)
}

// task is a goroutine of a service: run starts fn, end cancels fn's context
// and waits for it to return.
type task struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (t *task) run(fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	go func() {
		defer close(t.done)
		fn(ctx)
	}()
}

// end stops the goroutine, if it was started.
func (t *task) end(context.Context) error {
	if t.cancel != nil {
		t.cancel()
		<-t.done
	}
	return nil
}
