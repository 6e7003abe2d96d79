package sandbox

import (
	"context"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Admission: how many calls one sandbox runs at once before the next waits
// its turn at the gateway, first come, first served.
//
// Why: a sandbox has a CPU share (AgentSpec.CPUs). With 64 calls sent to
// it at once, all 64 processes start together and the kernel's scheduler
// and the share's quota decide which finish first; some wait twice as long
// as the mean (measured: 64 clients calling `exec true`, p50 76 ms, p99
// 160 ms). Held at the gateway in arrival order, a call waits its turn
// instead, and every call waits about the same (p99 1.2–1.3× p50) at
// nearly the same calls per second (up to ~4% fewer: with fewer calls at
// once the in-sandbox executor idles more between them). Limits of 2 and 4
// per CPU cost throughput (633 and 740 calls/s against ~800), 12 and 16
// gave the tail back in part.
//
// A call holds its place for at most QueueGrace: past it the call counts
// as long-running (a build, a server, a sleep) and the next one starts
// beside it, so a sandbox busy with long calls never holds short ones back
// for more than QueueGrace.
const (
	CallsPerCPU = 8
	QueueGrace  = 20 * time.Millisecond
)

// QueueLimit is how many calls a sandbox with cpus CPUs (0: no limit, the
// host's) runs at once before the next waits: CallsPerCPU per CPU, at
// least 2.
func QueueLimit(cpus float64) int {
	if cpus <= 0 {
		cpus = float64(runtime.NumCPU())
	}
	return max(2, int(math.Ceil(cpus*CallsPerCPU)))
}

// Queue admits calls first come, first served, at most a limit of them
// at once; each holds its place until it leaves or its grace runs out. The
// zero Queue is ready to use.
type Queue struct {
	mu      sync.Mutex
	limit   int
	running int
	waiting []chan struct{} // in arrival order; closed when it is a call's turn
}

// Enter waits for the call's turn: until fewer than limit calls hold a
// place and every call that came before it has its own. leave gives the
// place back (once; later calls are no-ops); the place is given back by
// itself after grace. An error is ctx's, and then the call has no place.
func (q *Queue) Enter(ctx context.Context, limit int, grace time.Duration) (leave func(), err error) {
	q.mu.Lock()
	q.limit = limit
	if len(q.waiting) == 0 && q.running < limit {
		q.running++
		q.mu.Unlock()
		return q.hold(grace), nil
	}
	turn := make(chan struct{})
	q.waiting = append(q.waiting, turn)
	q.admitLocked() // the limit may have grown
	q.mu.Unlock()
	select {
	case <-turn:
		return q.hold(grace), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	if i := slices.Index(q.waiting, turn); i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
		q.mu.Unlock()
		return nil, ctx.Err()
	}
	q.mu.Unlock()
	// Its turn came as ctx ended: the place goes to the next call.
	q.release()
	return nil, ctx.Err()
}

// Waiting is how many calls wait for their turn.
func (q *Queue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// hold is a held place's leave: it gives the place back once, by the
// call's leaving or by grace running out, whichever comes first.
func (q *Queue) hold(grace time.Duration) func() {
	var gone atomic.Bool
	give := func() {
		if gone.CompareAndSwap(false, true) {
			q.release()
		}
	}
	t := time.AfterFunc(grace, give)
	return func() {
		t.Stop()
		give()
	}
}

func (q *Queue) release() {
	q.mu.Lock()
	q.running--
	q.admitLocked()
	q.mu.Unlock()
}

// admitLocked gives places to the calls waiting longest while there are
// places free; under q.mu.
func (q *Queue) admitLocked() {
	n := 0
	for n < len(q.waiting) && q.running < q.limit {
		close(q.waiting[n])
		q.running++
		n++
	}
	q.waiting = q.waiting[n:]
}
