package sandbox

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv/wait"
)

// long is a grace no test outlives: places are given back by leaving.
const long = time.Hour

func TestQueueLimit(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		want int
	}{
		{0, runtime.NumCPU() * CallsPerCPU},
		{-1, runtime.NumCPU() * CallsPerCPU},
		{0.01, 2},
		{0.25, 2},
		{0.5, 4},
		{1, 8},
		{1.5, 12},
		{1.51, 13},
		{4, 32},
	} {
		if got := QueueLimit(c.cpus); got != c.want {
			t.Errorf("QueueLimit(%g) = %d, want %d", c.cpus, got, c.want)
		}
	}
}

// enter enters q in the background; its place (or error) arrives on the
// channel. It returns once the call waits, so calls queue in the order
// they were started.
func enter(t *testing.T, q *Queue, ctx context.Context, limit int, grace time.Duration) <-chan func() {
	t.Helper()
	before := q.Waiting()
	got := make(chan func(), 1)
	go func() {
		leave, err := q.Enter(ctx, limit, grace)
		if err != nil {
			leave = nil
		}
		got <- leave
	}()
	wait.For(t, "the queue to move", func() bool { return q.Waiting() == before+1 })
	return got
}

func mustEnter(t *testing.T, q *Queue, limit int, grace time.Duration) func() {
	t.Helper()
	leave, err := q.Enter(context.Background(), limit, grace)
	if err != nil {
		t.Fatal(err)
	}
	return leave
}

// admitted is the place ch delivers; it fails when none comes.
func admitted(t *testing.T, ch <-chan func(), what string) func() {
	t.Helper()
	select {
	case leave := <-ch:
		if leave == nil {
			t.Fatalf("%s got an error, not a place", what)
		}
		return leave
	case <-time.After(30 * time.Second):
		t.Fatalf("%s got no place in 30 s", what)
		return nil
	}
}

// notYet fails when ch delivers within a moment: a call admitted too early.
func notYet(t *testing.T, ch <-chan func(), what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s was admitted while the queue was full", what)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestQueueFirstComeFirstServed(t *testing.T) {
	var q Queue
	leave := mustEnter(t, &q, 1, long)
	var waiters []<-chan func()
	for range 5 {
		waiters = append(waiters, enter(t, &q, context.Background(), 1, long))
	}
	for _, w := range waiters {
		notYet(t, w, "a waiting call")
		leave()
		// The place goes to the call that came first, not a later one.
		leave = admitted(t, w, "the call that came first")
	}
	leave()
	if q.running != 0 || len(q.waiting) != 0 {
		t.Fatalf("after everyone left: %d running, %d waiting", q.running, len(q.waiting))
	}
}

func TestQueueHoldsAtLimit(t *testing.T) {
	var q Queue
	var leaves []func()
	for range 3 {
		leaves = append(leaves, mustEnter(t, &q, 3, long))
	}
	fourth := enter(t, &q, context.Background(), 3, long)
	notYet(t, fourth, "a fourth call at limit 3")
	leaves[1]()
	leaves[1]() // leaving twice gives back one place
	admitted(t, fourth, "the fourth call")
	fifth := enter(t, &q, context.Background(), 3, long)
	notYet(t, fifth, "a fifth call after a double leave")
}

// A call past its grace gives its place to the next; its own leave later
// gives back nothing more.
func TestQueueGrace(t *testing.T) {
	var q Queue
	slow := mustEnter(t, &q, 1, 50*time.Millisecond)
	next := enter(t, &q, context.Background(), 1, long)
	leaveNext := admitted(t, next, "the call after the slow one's grace")
	slow()
	third := enter(t, &q, context.Background(), 1, long)
	notYet(t, third, "a call while the next holds the only place")
	leaveNext()
	admitted(t, third, "the third call")
}

func TestQueueCancelWhileWaiting(t *testing.T) {
	var q Queue
	leave := mustEnter(t, &q, 1, long)
	ctx, cancel := context.WithCancel(context.Background())
	w := enter(t, &q, ctx, 1, long)
	cancel()
	if l := <-w; l != nil {
		t.Fatal("a cancelled call got a place")
	}
	if n := q.Waiting(); n != 0 {
		t.Fatalf("%d still waiting after the cancel", n)
	}
	ended, stop := context.WithCancel(context.Background())
	stop()
	if _, err := q.Enter(ended, 1, long); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with an ended context while full: %v", err)
	}
	leave()
	mustEnter(t, &q, 1, long)() // the cancelled call took no place with it
}

// A larger limit (a reload gave the sandbox more CPUs) admits at once.
func TestQueueLimitGrows(t *testing.T) {
	var q Queue
	leave := mustEnter(t, &q, 1, long)
	waiting := enter(t, &q, context.Background(), 1, long)
	more := make(chan func(), 1)
	go func() { more <- mustEnter(t, &q, 3, long) }()
	admitted(t, waiting, "the call waiting when the limit grew")
	admitted(t, more, "the call with the larger limit")
	leave()
}

// Many calls entering, leaving, timing out and cancelling at once: never
// more than the limit hold a place by leaving alone, and at the end the
// queue is empty.
func TestQueueConcurrent(t *testing.T) {
	var q Queue
	const limit = 3
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 50 {
				ctx, cancel := context.WithCancel(context.Background())
				if (i+j)%7 == 0 {
					go cancel()
				}
				leave, err := q.Enter(ctx, limit, long)
				if err != nil {
					cancel()
					continue
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if rand.IntN(4) == 0 {
					runtime.Gosched()
				}
				inside.Add(-1)
				leave()
				cancel()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Fatalf("%d calls held a place at once, limit %d", m, limit)
	}
	if q.running != 0 || len(q.waiting) != 0 {
		t.Fatalf("at the end: %d running, %d waiting", q.running, len(q.waiting))
	}
}
