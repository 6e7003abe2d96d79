package docker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
)

// syncBuffer is a log sink safe for the recreate goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// drainManager is a second manager on the test's Engine whose log the test
// reads, holding the sandbox of spec.
func drainManager(t *testing.T, spec sandbox.AgentSpec) (*Manager, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	m, err := New(context.Background(), Options{Instance: testInstance(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.Ensure(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	return m, logs
}

// waitRecreated waits until the agent's container is another than old.
func waitRecreated(t *testing.T, m *Manager, agent, old string, within time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, _, _ := m.agents.Lookup(agent)
		id := b.ContainerID()
		if id != old {
			return id
		}
	}
	t.Fatalf("the sandbox of %s was not recreated within %s", agent, within)
	return ""
}

// TestSpecChangeWaitsForCallsInFlight: a reload that changes a sandbox's
// spec while a call runs in it recreates the container only after the call
// finished; a call made meanwhile waits and runs in the new container.
func TestSpecChangeWaitsForCallsInFlight(t *testing.T) {
	spec, _ := newAgent(t)
	m, _ := drainManager(t, spec)
	ctx := context.Background()
	sb, err := m.Sandbox(ctx, spec.Agent)
	if err != nil {
		t.Fatal(err)
	}
	old := sb.(*Sandbox).ContainerID()
	long := make(chan execResult, 1)
	go func() {
		long <- run(ctx, sb, gateway.ExecSpec{Argv: []string{"sh", "-c", "touch /tmp/started; sleep 2; echo done"}})
	}()
	for mustRun(t, sb, "sh", "-c", "test -e /tmp/started && echo y || true").stdout != "y\n" {
		time.Sleep(20 * time.Millisecond)
	}

	changed := spec
	changed.Pids = spec.Pids + 1
	if err := m.SetSpecs([]sandbox.AgentSpec{changed}); err != nil {
		t.Fatal(err)
	}
	pending, err := m.Sync(ctx, changed)
	if err != nil || !pending {
		t.Fatalf("Sync with a call in flight: pending %v, %v", pending, err)
	}
	if again, err := m.Sync(ctx, changed); err != nil || !again {
		t.Fatalf("a second Sync while one waits: pending %v, %v", again, err)
	}
	next := make(chan execResult, 1)
	go func() {
		sb, err := m.Sandbox(ctx, spec.Agent)
		if err != nil {
			next <- execResult{err: err}
			return
		}
		next <- run(ctx, sb, gateway.ExecSpec{Argv: []string{"cat", "/proc/self/cgroup"}})
	}()
	if r := <-long; r.err != nil || r.out.ExitCode != 0 || r.stdout != "done\n" {
		t.Fatalf("the call in flight during the reload: %+v", r)
	}
	id := waitRecreated(t, m, spec.Agent, old, 30*time.Second)
	if r := <-next; r.err != nil || r.out.ExitCode != 0 {
		t.Fatalf("a call made while the recreate waited: %+v", r)
	}
	if got := inspect(t, id).HostConfig.PidsLimit; got == nil || *got != changed.Pids {
		t.Fatalf("the new container's pids limit: %v, want %d", got, changed.Pids)
	}
}

// TestSpecChangeDrainBound: a call that outlives the drain bound is cut,
// the container is recreated anyway, and the log says so.
func TestSpecChangeDrainBound(t *testing.T) {
	spec, _ := newAgent(t)
	spec.Drain = time.Millisecond // bound: the kill grace
	m, logs := drainManager(t, spec)
	ctx := context.Background()
	sb, err := m.Sandbox(ctx, spec.Agent)
	if err != nil {
		t.Fatal(err)
	}
	old := sb.(*Sandbox).ContainerID()
	stuck := make(chan execResult, 1)
	go func() {
		stuck <- run(ctx, sb, gateway.ExecSpec{Argv: []string{"sh", "-c", "touch /tmp/started; sleep 60"}})
	}()
	for mustRun(t, sb, "sh", "-c", "test -e /tmp/started && echo y || true").stdout != "y\n" {
		time.Sleep(20 * time.Millisecond)
	}
	changed := spec
	changed.Pids = spec.Pids + 1
	if err := m.SetSpecs([]sandbox.AgentSpec{changed}); err != nil {
		t.Fatal(err)
	}
	if pending, err := m.Sync(ctx, changed); err != nil || !pending {
		t.Fatalf("Sync: pending %v, %v", pending, err)
	}
	waitRecreated(t, m, spec.Agent, old, killGrace+30*time.Second)
	if r := <-stuck; r.err == nil {
		t.Fatalf("a call past the drain bound was not cut: %+v", r)
	}
	if !strings.Contains(logs.String(), "drain bound passed") {
		t.Fatalf("the forced recreate was not logged:\n%s", logs)
	}
}
