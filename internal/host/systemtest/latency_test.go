package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/cgroup"
	"github.com/toolgate/toolgate/internal/testenv/timing"
)

// TestLauncherLatency prints, for 500 sequential calls from inside a
// sandbox on the daemon's production configuration, p50/p99 per call
// including the process start: the builtin echo plugin through the lean
// launcher (/tools/bin/echo; stdin an empty pipe, or a file it streams),
// through the full client and through a
// shell-script launcher; Claude Code's gate and tap as the CLI runs them
// (sh -c, hook input on stdin); and a bare process start for scale. Timing is no assertion; run it to measure:
//
//	TOOLGATE_BENCH=1 go test ./internal/host/systemtest -run LauncherLatency -v
func TestLauncherLatency(t *testing.T) {
	if os.Getenv("TOOLGATE_BENCH") != "1" {
		t.Skip("set TOOLGATE_BENCH=1 to measure")
	}
	e, a := pluginEnv(t)
	ws := filepath.Join(e.Home, "agents", a, "workspace")
	if err := os.WriteFile(filepath.Join(ws, "sh-echo"), []byte("#!/bin/sh\nexec /tools/toolgate-client call echo \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, sample := range map[string]string{"pre.json": "hook-input-PreToolUse-Bash.json", "post.json": "hook-input-PostToolUse-Bash.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "proto", "hooks", "testdata", "claude-code-samples", sample))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("%-44s %8s %8s\n", "500 sequential calls, inside the sandbox", "p50 µs", "p99 µs")
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"/tools/bin/echo (toolgate-launch)", []string{"/tools/bin/echo", "hi"}},
		{"/tools/bin/echo, stdin streamed (a file)", []string{"-in", "/workspace/pre.json", "/tools/bin/echo", "hi"}},
		{"toolgate-client call echo", []string{"/tools/toolgate-client", "call", "echo", "hi"}},
		{"sh script → toolgate-client call", []string{"/workspace/sh-echo", "hi"}},
		{"Claude Code gate (sh -c, hook pre-tool-use)", []string{"-in", "/workspace/pre.json", "/bin/sh", "-c", "/tools/toolgate-client hook pre-tool-use"}},
		{"Claude Code tap (sh -c, hook post-tool-use)", []string{"-in", "/workspace/post.json", "/bin/sh", "-c", "/tools/toolgate-client hook post-tool-use"}},
		{"/bin/true (process start only)", []string{"/bin/true"}},
	} {
		l := e.timeInSandbox(t, a, 500, 1, c.argv...)
		fmt.Printf("%-44s %8d %8d\n", c.name, l.P50, l.P99)
	}
	e.Verify()
}

// pluginEnv is a daemon on its production configuration whose one agent may
// call the builtin echo plugin as /tools/bin/echo, with the in-sandbox timer
// in its workspace.
func pluginEnv(t testing.TB) (*Env, string) {
	t.Helper()
	e := New(t, "lat")
	a := e.Agents[0]
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf("gateway:\n  clientBinary: %s\nplugins:\n  echo: {kind: builtin, builtin: toolgate-echo}\nagents:\n  %s:\n    tools: [echo]\n", clientBin, a)
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	timing.Build(t, filepath.Join(e.Home, "agents", a, "workspace"))
	e.waitExecutor(t, a)
	return e, a
}

// waitExecutor waits until agent's warm executor serves, so what is
// measured is not the Engine's exec a call falls back on while the sandbox
// starts.
func (e *Env) waitExecutor(t testing.TB, agent string) {
	t.Helper()
	sock := filepath.Join(e.Home, "agents", agent, "exec", proto.ExecSocketName)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the executor of %s did not come up at %s", agent, sock)
		}
	}
}

// sandboxCPU returns a reader of the CPU cgroup of agent's sandbox: what a
// benchmark's calls cost the sandbox, and how long its quota held it back.
func (e *Env) sandboxCPU(b *testing.B, agent string) func() cgroup.CPUStat {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.ContainerInspect(context.Background(), e.ContainerID(agent), client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil {
		b.Fatalf("inspecting the sandbox: %v", err)
	}
	pid := res.Container.State.Pid
	return func() cgroup.CPUStat {
		s, err := cgroup.ProcessCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
}

// timeInSandbox runs the timer in agent's sandbox: n runs of argv, c at a time.
func (e *Env) timeInSandbox(t testing.TB, agent string, n, c int, argv ...string) timing.Latency {
	t.Helper()
	res, err := e.Call(agent, "exec", map[string]any{
		"argv":    append([]string{"/workspace/timer", "-n", strconv.Itoa(n), "-c", strconv.Itoa(c)}, argv...),
		"timeout": "10m"})
	var l timing.Latency
	if err != nil || json.Unmarshal([]byte(fmt.Sprint(Out(res, "stdout"))), &l) != nil {
		t.Fatalf("timing %q: %v %+v", argv, err, res)
	}
	return l
}

// BenchmarkGoalPluginCall is a plugin call from inside a sandbox, process
// start included: /tools/bin/echo (launcher → agent socket → decision
// fsync'ed → builtin echo) beside starting /bin/true the same way. Both run
// with stdin an empty pipe, as from a script. Goal: toolgate p50 ≤ 2 ms,
// p99 ≤ 4 ms.
//
// Where a call's time goes (host, p50): the launcher's start (C, static:
// ~0.03 ms of CPU; the Go launcher it replaced took ~1.3 ms, ~0.8 of it the
// runtime's start), then the round trip from connect to the result frame,
// ~0.55 ms: the decision's fsync ~0.19 ms (fdatasync is no cheaper for an
// append), the gateway's work (HTTP, header, decide, entry, echo, frames)
// ~0.15–0.2 ms of CPU, the rest wake-ups.
//
//	go test ./internal/host/systemtest -run '^$' -bench 'GoalPluginCall$' -benchtime 2000x
func BenchmarkGoalPluginCall(b *testing.B) {
	e, a := pluginEnv(b)
	for _, c := range []struct{ name, path string }{
		{"toolgate", "/tools/bin/echo"},
		{"baseline", "/bin/true"},
	} {
		b.Run(c.name, func(b *testing.B) {
			e.timeInSandbox(b, a, b.N, 1, c.path, "hi").Report(b)
		})
	}
	e.Verify()
}

// BenchmarkGoalExec64 is `exec true` through the admin API from 64 clients
// at once (each its own connection, as 64 CLIs or MCP sessions would be)
// beside the machine's floor for the same work: the same number of
// `/bin/true` started 64 at a time inside the sandbox with no gateway at
// all. Goal: toolgate p99 ≤ 100 ms with calls/s no lower than before.
// Both also report what the sandbox spent in CPU per call and how long its
// CPU quota held it back per CPU-second it used (cgroup cpu.stat).
//
// With 64 calls at once the mean latency is 64 ÷ calls/s, and calls/s is
// bounded by the sandbox's CPU share (~0.45–0.6 ms of its CPU per call:
// the executor's fork and request, `true`'s start-up; a glibc `true` took
// 0.7 ms more on this VM, rootfs.busyboxSource); what keeps p99 near the
// mean is the sandbox's queue (sandbox.Queue: first come, first served,
// 8 at once per CPU).
//
//	go test ./internal/host/systemtest -run '^$' -bench GoalExec64 -benchtime 2000x
func BenchmarkGoalExec64(b *testing.B) {
	const clients = 64
	e := New(b, "c64")
	a := e.Agents[0]
	timing.Build(b, filepath.Join(e.Home, "agents", a, "workspace"))
	cs := make([]*adminclient.Client, clients)
	for i := range cs {
		var err error
		if cs[i], err = adminclient.Dial(e.Home); err != nil {
			b.Fatal(err)
		}
	}
	args := map[string]any{"argv": []string{"true"}}
	e.waitExecutor(b, a)
	cpu := e.sandboxCPU(b, a)
	b.Run("toolgate", func(b *testing.B) {
		d := make([]time.Duration, b.N)
		next := make(chan int, b.N)
		for i := range b.N {
			next <- i
		}
		close(next)
		var wg sync.WaitGroup
		b.ResetTimer()
		start, used := time.Now(), cpu()
		for _, c := range cs {
			wg.Go(func() {
				for i := range next {
					t0 := time.Now()
					res, err := c.Call(context.Background(), a, "exec", args, nil, nil)
					if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
						b.Errorf("exec true: %v %+v", err, res)
						return
					}
					d[i] = time.Since(t0)
				}
			})
		}
		wg.Wait()
		wall := time.Since(start)
		b.StopTimer()
		cpu().Sub(used).Report(b, b.N, "call")
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(b.N)/wall.Seconds(), "calls/s")
	})
	b.Run("baseline", func(b *testing.B) {
		used := cpu()
		l := e.timeInSandbox(b, a, b.N, clients, "/bin/true")
		cpu().Sub(used).Report(b, b.N, "call")
		l.Report(b)
		b.ReportMetric(l.PerSecond, "calls/s")
	})
	e.Verify()
}
