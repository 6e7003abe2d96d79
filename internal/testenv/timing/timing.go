// Package timing measures latency inside a sandbox: Build puts a static
// timer (./timer) into a directory the sandbox sees, and the timer prints a
// Latency of the command it ran N times, process start to exit.
package timing

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
	P50        int64  `json:"p50_us"`
	P99        int64  `json:"p99_us"`
	LastStdout string `json:"last_stdout"`
}
