// Package cgroup reads a process's CPU cgroup from the host (v1 or v2): the
// CPU it used, how often its quota throttled it, and the quota itself, for
// the tests that check a sandbox's limit and the benchmarks that report
// what a call costs the sandbox.
package cgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CPUStat is a process's CPU cgroup as the host sees it: the CPU it used
// and how often the CFS quota throttled it (cgroup v1 or v2).
type CPUStat struct {
	Usage         time.Duration
	Periods       int64 // CFS periods in which the group ran
	Throttled     int64 // of them, periods it ran out of quota in
	ThrottledTime time.Duration
}

// Sub is s minus an earlier reading.
func (s CPUStat) Sub(o CPUStat) CPUStat {
	return CPUStat{s.Usage - o.Usage, s.Periods - o.Periods, s.Throttled - o.Throttled, s.ThrottledTime - o.ThrottledTime}
}

// Report reports what the group used per op on b (op: what b.N counts):
// CPU microseconds, and the time it stood throttled per second of CPU.
func (s CPUStat) Report(b *testing.B, n int, op string) {
	b.ReportMetric(float64(s.Usage.Microseconds())/float64(n), "sandbox-cpu-µs/"+op)
	if s.Usage > 0 {
		b.ReportMetric(float64(s.ThrottledTime.Milliseconds())/s.Usage.Seconds(), "throttled-ms/cpu-s")
	}
}

// ProcessCPU reads the CPU cgroup of process pid (a container's init, its
// State.Pid) from the host's /sys/fs/cgroup.
func ProcessCPU(pid int) (CPUStat, error) {
	paths, err := cgroupPaths(pid)
	if err != nil {
		return CPUStat{}, err
	}
	var s CPUStat
	if cpu, ok := paths["cpu"]; ok { // cgroup v1: usage is cpuacct's
		b, err := os.ReadFile(v1File(paths["cpuacct"], "cpuacct", "cpuacct.usage"))
		if err != nil {
			return s, err
		}
		ns, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil {
			return s, fmt.Errorf("cpuacct.usage: %w", err)
		}
		s.Usage = time.Duration(ns)
		st, err := readKeyed(v1File(cpu, "cpu", "cpu.stat"))
		s.Periods, s.Throttled, s.ThrottledTime = st["nr_periods"], st["nr_throttled"], time.Duration(st["throttled_time"])
		return s, err
	}
	st, err := readKeyed(filepath.Join("/sys/fs/cgroup", paths[""], "cpu.stat"))
	s.Usage = time.Duration(st["usage_usec"]) * time.Microsecond
	s.Periods, s.Throttled, s.ThrottledTime = st["nr_periods"], st["nr_throttled"], time.Duration(st["throttled_usec"])*time.Microsecond
	return s, err
}

// v1File is a cgroup v1 controller's file: its hierarchy is mounted alone
// (/sys/fs/cgroup/cpuacct) or joined with another (cpu,cpuacct).
func v1File(path, controller, name string) string {
	for _, dir := range []string{controller, "cpu,cpuacct"} {
		f := filepath.Join("/sys/fs/cgroup", dir, path, name)
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return filepath.Join("/sys/fs/cgroup", controller, path, name)
}

// Limit is pid's CFS bandwidth limit as "QUOTA PERIOD" in µs, the shape of
// cgroup v2's cpu.max ("max PERIOD" for none).
func Limit(pid int) (string, error) {
	paths, err := cgroupPaths(pid)
	if err != nil {
		return "", err
	}
	cpu, ok := paths["cpu"]
	if !ok {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", paths[""], "cpu.max"))
		return string(bytes.TrimSpace(b)), err
	}
	var v [2]string
	for i, name := range []string{"cpu.cfs_quota_us", "cpu.cfs_period_us"} {
		b, err := os.ReadFile(v1File(cpu, "cpu", name))
		if err != nil {
			return "", err
		}
		v[i] = string(bytes.TrimSpace(b))
	}
	if v[0] == "-1" {
		v[0] = "max"
	}
	return v[0] + " " + v[1], nil
}

// cgroupPaths is pid's cgroup path by controller ("" the unified, v2 one).
func cgroupPaths(pid int) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	paths := map[string]string{}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	if _, ok := paths["cpu"]; !ok {
		if _, ok := paths[""]; !ok {
			return nil, fmt.Errorf("no cpu cgroup for pid %d", pid)
		}
	}
	return paths, nil
}

// readKeyed reads a cgroup file of "key value" lines.
func readKeyed(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			m[k] = n
		}
	}
	return m, sc.Err()
}
