// Package timing measures latency for the benchmarks: Run reports p50/p99
// of a Go benchmark's runs; Build puts a static timer (./timer) into a
// directory a sandbox sees, which prints the Latency of the command it ran N
// times there, process start to exit.
package timing

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Build builds the static timer into dir, e.g. an agent's workspace, and
// returns its path on the host.
func Build(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "timer")
	cmd := exec.Command("go", "build", "-o", out, "github.com/toolgate/toolgate/internal/testenv/timing/timer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the timer: %v\n%s", err, b)
	}
	return out
}

// Latency is what the timer prints.
type Latency struct {
	P50        int64   `json:"p50_us"`
	P99        int64   `json:"p99_us"`
	PerSecond  float64 `json:"per_s"` // runs per second of wall time
	LastStdout string  `json:"last_stdout"`
}

// Report reports l's percentiles in ms on b.
func (l Latency) Report(b *testing.B) {
	b.ReportMetric(float64(l.P50)/1000, "p50-ms")
	b.ReportMetric(float64(l.P99)/1000, "p99-ms")
}

// Run runs fn b.N times and reports the p50/p99 of one run in ms: a tail
// matters to an agent waiting on a call, an average hides it.
func Run(b *testing.B, fn func() error) {
	b.Helper()
	RunTimed(b, func() (time.Duration, error) {
		t0 := time.Now()
		err := fn()
		return time.Since(t0), err
	})
}

// RunTimed is Run for an fn that times the part to measure itself, so its
// set-up and clean-up (removing containers, stopping a daemon) are not
// counted.
func RunTimed(b *testing.B, fn func() (time.Duration, error)) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		took, err := fn()
		if err != nil {
			b.Fatal(err)
		}
		d = append(d, took)
	}
	b.StopTimer()
	slices.Sort(d)
	ms := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}
