package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
)

// upManager is a manager of its own instance, so the specs it is given are
// the only ones it has.
func upManager(t *testing.T, instance string) *Manager {
	t.Helper()
	needDocker(t)
	m, err := New(context.Background(), Options{Instance: testInstance() + "-" + instance})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// upSpec is a test-unique agent's spec; nothing is created yet.
func upSpec(t *testing.T, m *Manager, suffix string) sandbox.AgentSpec {
	t.Helper()
	name := testPrefix + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + suffix
	spec := sandbox.AgentSpec{Agent: name, Image: testImage, Workspace: filepath.Join(testTmp, "agents", name, "workspace"),
		Memory: 256 << 20, CPUs: 1, Pids: 128, ClientBinary: testClient}
	if err := os.RemoveAll(filepath.Dir(spec.Workspace)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Remove(context.Background(), name) })
	return spec
}

func statusOf(t *testing.T, m *Manager, agent string) sandbox.Status {
	t.Helper()
	st, err := m.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Agent == agent {
			return s
		}
	}
	t.Fatalf("no status for %s in %+v", agent, st)
	return sandbox.Status{}
}

// A call to a sandbox still coming up waits for it and then runs in it;
// meanwhile the status says starting.
func TestUpCallWaitsForStartingSandbox(t *testing.T) {
	m := upManager(t, "wait")
	spec := upSpec(t, m, "a")
	if err := m.SetSpecs([]sandbox.AgentSpec{spec}); err != nil {
		t.Fatal(err)
	}
	// Holding the agent's lock keeps its bring-up from finishing.
	_, lock := m.agents.Register(spec)
	lock.Lock()
	done := m.Up(context.Background(), []sandbox.AgentSpec{spec})
	if st := statusOf(t, m, spec.Agent); st.State != StateStarting || st.ContainerID != "" {
		t.Fatalf("status while coming up: %+v", st)
	}
	got := make(chan execResult, 1)
	go func() {
		sb, err := m.Sandbox(context.Background(), spec.Agent)
		if err != nil {
			got <- execResult{err: err}
			return
		}
		got <- run(context.Background(), sb, gateway.ExecSpec{Argv: []string{"echo", "hi"}})
	}()
	time.Sleep(100 * time.Millisecond) // time to return early, were it wrong
	select {
	case r := <-got:
		t.Fatalf("the call returned while its sandbox was starting: %+v", r)
	default:
	}
	lock.Unlock()
	<-done
	r := <-got
	if r.err != nil || r.stdout != "hi\n" || r.out.ExitCode != 0 {
		t.Fatalf("call after the sandbox came up: %+v", r)
	}
	if st := statusOf(t, m, spec.Agent); st.State != "running" || st.ContainerID == "" || st.StartedAt.IsZero() {
		t.Fatalf("status once up: %+v", st)
	}
}

// A sandbox that cannot come up (its image is missing, or a container not
// this instance's holds its name) is failed with the reason, its calls get
// an error wrapping gateway.ErrSandboxUnavailable and nothing runs
// anywhere else; the other agents come up and work.
func TestUpFailureIsReportedAndOthersRun(t *testing.T) {
	m := upManager(t, "fail")
	good, noImage, taken := upSpec(t, m, "good"), upSpec(t, m, "noimage"), upSpec(t, m, "taken")
	noImage.Image = "toolgate/no-such-image:" + testInstance()
	ctx := context.Background()
	foreign, err := m.Client().ContainerCreate(ctx, client.ContainerCreateOptions{Name: m.ContainerName(taken.Agent),
		Config: &container.Config{Image: testImage, Cmd: []string{"/bin/true"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Client().ContainerRemove(ctx, foreign.ID, client.ContainerRemoveOptions{Force: true})
	specs := []sandbox.AgentSpec{good, noImage, taken}
	if err := m.SetSpecs(specs); err != nil {
		t.Fatal(err)
	}
	<-m.Up(ctx, specs)

	for _, bad := range []sandbox.AgentSpec{noImage, taken} {
		if st := statusOf(t, m, bad.Agent); st.State != StateFailed || st.Error == "" || st.ContainerID != "" {
			t.Errorf("status of %s: %+v", bad.Agent, st)
		}
		sb, err := m.Sandbox(ctx, bad.Agent)
		if !errors.Is(err, gateway.ErrSandboxUnavailable) || sb != nil {
			t.Errorf("call to %s: %v %v", bad.Agent, sb, err)
		}
	}
	if st := statusOf(t, m, good.Agent); st.State != "running" {
		t.Fatalf("status of the good agent: %+v", st)
	}
	sb, err := m.Sandbox(ctx, good.Agent)
	if err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, sb, "echo", "ok"); r.stdout != "ok\n" {
		t.Fatalf("good agent: %+v", r)
	}
	// The container holding the name was neither adopted nor removed.
	if got := inspect(t, foreign.ID); got.ID != foreign.ID || got.Config.Labels[LabelManaged] != "" {
		t.Fatalf("the foreign container changed: %+v", got.Config.Labels)
	}
}

// A new manager (a restarted gateway) re-attaches the running containers
// of the same spec, and recreates the one whose spec changed.
func TestUpReattaches(t *testing.T) {
	m := upManager(t, "reattach")
	a, b := upSpec(t, m, "a"), upSpec(t, m, "b")
	specs := []sandbox.AgentSpec{a, b}
	if err := m.SetSpecs(specs); err != nil {
		t.Fatal(err)
	}
	<-m.Up(context.Background(), specs)
	ids := map[string]string{}
	for _, s := range specs {
		st := statusOf(t, m, s.Agent)
		if st.State != "running" {
			t.Fatalf("first start: %+v", st)
		}
		ids[s.Agent] = st.ContainerID
	}

	m2, err := New(context.Background(), Options{Instance: m.Instance()})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	b.Memory = 200 << 20
	specs = []sandbox.AgentSpec{a, b}
	if err := m2.SetSpecs(specs); err != nil {
		t.Fatal(err)
	}
	<-m2.Up(context.Background(), specs)
	if st := statusOf(t, m2, a.Agent); st.State != "running" || st.ContainerID != ids[a.Agent] {
		t.Fatalf("unchanged agent not re-attached: %+v, was %s", st, ids[a.Agent])
	}
	st := statusOf(t, m2, b.Agent)
	if st.State != "running" || st.ContainerID == ids[b.Agent] {
		t.Fatalf("changed agent not recreated: %+v", st)
	}
	if got := inspect(t, st.ContainerID).HostConfig.Memory; got != 200<<20 {
		t.Fatalf("recreated with memory %d", got)
	}
}

// The binaries' sums are cached per version of the file: a binary replaced
// in place, with its size and mtime set back, is hashed again (a changed
// client must change the spec, so its sandboxes are recreated).
func TestFileSumsFollowTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "toolgate-client")
	if err := os.WriteFile(p, []byte("version one"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	var f fileSums
	s1, err := f.sum(p)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := f.sum(p); again != s1 {
		t.Fatal("the same file hashed to another sum")
	}
	// The kernel's ctime ticks coarsely (a few ms): let one tick pass, as
	// between two builds of a binary.
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(p, []byte("version two"), 0o755); err != nil { // same size
		t.Fatal(err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	s2, err := f.sum(p)
	if err != nil {
		t.Fatal(err)
	}
	if s2 == s1 {
		t.Fatal("a rewritten file kept its cached sum")
	}
	if _, err := f.sum(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// A spec nothing can bring up (its workspace is not an absolute path) is
// failed from the start, not starting until a call's wait runs out, and
// nothing is written for it.
func TestInvalidSpecFailsAtOnce(t *testing.T) {
	m := upManager(t, "invalid")
	spec := upSpec(t, m, "a")
	spec.Workspace = "relative/workspace"
	t.Chdir(t.TempDir())
	if err := m.SetSpecs([]sandbox.AgentSpec{spec}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("relative"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SetSpecs wrote for an invalid spec: %v", err)
	}
	if st := statusOf(t, m, spec.Agent); st.State != StateFailed || st.Error == "" {
		t.Fatalf("status: %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.Sandbox(ctx, spec.Agent); !errors.Is(err, gateway.ErrSandboxUnavailable) {
		t.Fatalf("call: %v", err)
	}
	<-m.Up(ctx, []sandbox.AgentSpec{spec})
	if st := statusOf(t, m, spec.Agent); st.State != StateFailed {
		t.Fatalf("status after Up: %+v", st)
	}
}
