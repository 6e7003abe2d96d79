package guest

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// cgroupRoot is where a sandbox sees its own cgroup (its cgroup namespace
// on v2; Docker's per-container mount on v1).
const cgroupRoot = "/sys/fs/cgroup"

// setExecutorProcs gives the executor one P per whole CPU of its
// sandbox's limit. Go gives a limited process at least two, so that a
// thread stuck in a system call does not stop the rest; the executor's
// calls never wait in one (waitLeader waits in the poller), and only a
// fork holds its P, until the child execs. Two Ps on one CPU's quota
// cost a third of the executor's CPU in thread switches: every goroutine
// made ready woke a spinning thread for the idle P. With one, 64 calls at
// once took ~5% less of the sandbox's CPU each, and one call ~0.15 ms
// less time (BenchmarkGoalExec64, BenchmarkExecTrue).
func setExecutorProcs() {
	if limit, ok := cgroupCPULimit(cgroupRoot); ok {
		if n := procsFor(limit, runtime.NumCPU()); n > 0 {
			runtime.GOMAXPROCS(n)
		}
	}
}

// procsFor is the Ps for a CPU limit of limit on ncpu CPUs: the whole
// CPUs of the limit, at least one; 0 (keep Go's choice) when the limit is
// no lower than the machine.
func procsFor(limit float64, ncpu int) int {
	if limit <= 0 || limit >= float64(ncpu) {
		return 0
	}
	return max(1, int(limit))
}

// cgroupCPULimit reads the CPU limit, in CPUs, of the cgroup at root:
// cgroup v2's cpu.max ("QUOTA PERIOD", or "max PERIOD" for none), else
// v1's cpu/cpu.cfs_quota_us (-1 for none) over cpu.cfs_period_us. ok is
// false when there is none or it cannot be read.
func cgroupCPULimit(root string) (cpus float64, ok bool) {
	if b, err := os.ReadFile(filepath.Join(root, "cpu.max")); err == nil {
		f := strings.Fields(string(b))
		if len(f) != 2 {
			return 0, false
		}
		return ratio(f[0], f[1])
	}
	q, err := os.ReadFile(filepath.Join(root, "cpu", "cpu.cfs_quota_us"))
	if err != nil {
		return 0, false
	}
	p, err := os.ReadFile(filepath.Join(root, "cpu", "cpu.cfs_period_us"))
	if err != nil {
		return 0, false
	}
	return ratio(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

// ratio is quota/period for a set quota ("max" and -1 are none).
func ratio(quota, period string) (float64, bool) {
	q, err := strconv.ParseInt(quota, 10, 64)
	if err != nil || q <= 0 {
		return 0, false
	}
	p, err := strconv.ParseInt(period, 10, 64)
	if err != nil || p <= 0 {
		return 0, false
	}
	return float64(q) / float64(p), true
}
