package kube

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// BenchmarkExecRoundTrip: `echo hi` in an agent's pod through the warm
// executor (what Exec uses), through pods/exec from this process (the
// fallback), and through `kubectl exec` of the same command (the
// baseline: what an operator would do; includes kubectl's own start).
//
//	go test -run '^$' -bench ExecRoundTrip ./internal/host/sandbox/kube
func BenchmarkExecRoundTrip(b *testing.B) {
	c := needCluster(b)
	m := c.manager(b, "bench")
	spec := c.agent(b, m, "")
	ctx := context.Background()
	sb, err := m.Ensure(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	argv := []string{"echo", "hi"}
	check := func(b *testing.B, r execResult) {
		if r.err != nil || r.out.ExitCode != 0 || r.stdout != "hi\n" {
			b.Fatalf("%+v", r)
		}
	}
	b.Run("executor", func(b *testing.B) {
		waitExecutor(b, sb)
		for b.Loop() {
			check(b, run(ctx, sb.viaExecutorOnly, gateway.ExecSpec{Argv: argv}))
		}
	})
	b.Run("pods-exec", func(b *testing.B) {
		for b.Loop() {
			check(b, run(ctx, sb.ExecThroughAPI, gateway.ExecSpec{Argv: argv}))
		}
	})
	b.Run("kubectl-exec", func(b *testing.B) {
		name, _ := sb.Pod()
		kubectl := filepath.Join(c.dir, "bin", "kubectl")
		kubeconfig := filepath.Join(c.dir, "run", "pki", "admin.kubeconfig")
		for b.Loop() {
			out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", c.ns, "exec", name, "-c", Container, "--", "echo", "hi").Output()
			if err != nil || string(out) != "hi\n" {
				b.Fatalf("%v %q", err, out)
			}
		}
	})
}

// BenchmarkColdStart: from no pod to the first call answered (pod created,
// scheduled on the node, started, exec through pods/exec since the
// executor is not up yet).
//
//	go test -run '^$' -bench ColdStart -benchtime 5x ./internal/host/sandbox/kube
func BenchmarkColdStart(b *testing.B) {
	c := needCluster(b)
	m := c.manager(b, "cold")
	spec := c.agent(b, m, "")
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		if err := m.Remove(ctx, spec.Agent); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		sb, err := m.Ensure(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		if r := run(ctx, sb.Exec, gateway.ExecSpec{Argv: []string{"true"}}); r.err != nil || r.out.ExitCode != 0 {
			b.Fatalf("%+v", r)
		}
	}
}
