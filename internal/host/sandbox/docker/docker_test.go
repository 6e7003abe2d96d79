package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/guest/launcher"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/hooks"
	"github.com/toolgate/toolgate/internal/testenv/cgroup"
	"github.com/toolgate/toolgate/internal/testenv/timing"
	"github.com/toolgate/toolgate/internal/testenv/tmpdir"
)

// Shared by the Docker tests; set up once in TestMain.
var (
	testMgr     *Manager
	testImage   string
	testClient  string // host path of the static toolgate-client
	testPrefix  string // unique agent-name prefix of this run
	testTmp     string
	dockerError error // why Docker tests are skipped
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	ctx := context.Background()
	var err error
	if testTmp, err = tmpdir.New("toolgate-docker-test"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(testTmp)
	testPrefix = fmt.Sprintf("t%d-", os.Getpid())
	testImage = "toolgate/sandbox:test-" + fmt.Sprint(os.Getpid())

	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	testMgr, dockerError = New(pctx, Options{Instance: testInstance()})
	cancel()
	if dockerError != nil {
		if os.Getenv("TOOLGATE_REQUIRE_DOCKER") == "1" {
			fmt.Fprintln(os.Stderr, "TOOLGATE_REQUIRE_DOCKER=1:", dockerError)
			return 1
		}
		return m.Run()
	}
	defer testMgr.Close()
	if err := setupDocker(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "docker test setup:", err)
		return 1
	}
	defer cleanupDocker(ctx)
	return m.Run()
}

func setupDocker(ctx context.Context) error {
	testClient = filepath.Join(testTmp, "toolgate-client")
	build := exec.Command("go", "build", "-o", testClient, "github.com/toolgate/toolgate/cmd/toolgate-client")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building toolgate-client: %v\n%s", err, out)
	}
	if err := launcher.Build(filepath.Join(testTmp, "toolgate-launch")); err != nil {
		return err
	}
	_, err := testMgr.BuildDefaultImage(ctx, testImage, true)
	return err
}

// cleanupDocker removes every container of this run, then the test image.
func cleanupDocker(ctx context.Context) {
	cli := testMgr.Client()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelManaged+"=true")})
	if err == nil {
		for _, c := range res.Items {
			if strings.HasPrefix(c.Labels[LabelAgent], testPrefix) {
				_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
	}
	_, _ = cli.ImageRemove(ctx, testImage, client.ImageRemoveOptions{Force: true})
}

// testInstance is this run's instance id, so runs never share containers.
func testInstance() string { return fmt.Sprintf("test%d", os.Getpid()) }

// needDocker skips when the Engine is unreachable (fails under TOOLGATE_REQUIRE_DOCKER=1).
func needDocker(t testing.TB) {
	t.Helper()
	if testing.Short() { // testenv.Long, which imports this package
		t.Skip("-short: needs Docker")
	}
	if dockerError != nil {
		if os.Getenv("TOOLGATE_REQUIRE_DOCKER") == "1" {
			t.Fatal(dockerError)
		}
		t.Skip(dockerError)
	}
}

// newAgent ensures a fresh sandbox for a test-unique agent.
func newAgent(t testing.TB, mutate ...func(*sandbox.AgentSpec)) (sandbox.AgentSpec, *Sandbox) {
	t.Helper()
	needDocker(t)
	name := testPrefix + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	spec := sandbox.AgentSpec{
		Agent:        name,
		Image:        testImage,
		Workspace:    filepath.Join(testTmp, "agents", name, "workspace"),
		User:         "1000:1000",
		Memory:       256 << 20,
		CPUs:         1,
		Pids:         128,
		ClientBinary: testClient,
	}
	for _, f := range mutate {
		f(&spec)
	}
	// A fresh agent directory, also when the test runs again (-count).
	if err := os.RemoveAll(filepath.Dir(spec.Workspace)); err != nil {
		t.Fatal(err)
	}
	sb, err := testMgr.Ensure(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testMgr.Remove(context.Background(), name) })
	waitExecutor(t, sb)
	return spec, sb
}

// waitExecutor waits until init has started the sandbox's executor.
func waitExecutor(t testing.TB, sb *Sandbox) {
	t.Helper()
	_, spec := sb.h.Current()
	for range 1000 {
		if c, err := hostexec.Dial(context.Background(), spec.ExecDir(), 1000); err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the sandbox executor never came up")
}

// execPaths are the two ways an exec reaches the sandbox; the exec tests
// run over both. The executor path fails instead of falling back.
var execPaths = []struct {
	name string
	exec func(s *Sandbox, ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error)
}{
	{"executor", func(s *Sandbox, ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
		return s.execExecutor(ctx, spec, callIDOf(spec))
	}},
	{"engine", func(s *Sandbox, ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
		return s.execEngine(ctx, spec, callIDOf(spec))
	}},
}

func callIDOf(spec *gateway.ExecSpec) string {
	if spec.CallID != "" {
		return spec.CallID
	}
	return gateway.NewID()
}

// runVia is run through one exec path.
func runVia(ctx context.Context, path int, sb *Sandbox, spec gateway.ExecSpec) execResult {
	var o, e bytes.Buffer
	spec.Stdout, spec.Stderr = &o, &e
	out, err := execPaths[path].exec(sb, ctx, &spec)
	return execResult{o.String(), e.String(), out, err}
}

type execResult struct {
	stdout, stderr string
	out            *gateway.ExecOutcome
	err            error
}

func run(ctx context.Context, sb gateway.Sandbox, spec gateway.ExecSpec) execResult {
	var o, e bytes.Buffer
	spec.Stdout, spec.Stderr = &o, &e
	out, err := sb.Exec(ctx, &spec)
	return execResult{o.String(), e.String(), out, err}
}

func mustRun(t *testing.T, sb gateway.Sandbox, argv ...string) execResult {
	t.Helper()
	r := run(context.Background(), sb, gateway.ExecSpec{Argv: argv})
	if r.err != nil {
		t.Fatalf("%q: %v", argv, r.err)
	}
	return r
}

func inspect(t *testing.T, id string) container.InspectResponse {
	t.Helper()
	res, err := testMgr.Client().ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Container
}

func TestSecurityDefaults(t *testing.T) {
	spec, sb := newAgent(t)
	c := inspect(t, sb.ContainerID())
	hc := c.HostConfig
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"network none", hc.NetworkMode == "none", hc.NetworkMode},
		{"cap drop ALL", len(hc.CapDrop) == 1 && hc.CapDrop[0] == "ALL", hc.CapDrop},
		{"no cap add", len(hc.CapAdd) == 0, hc.CapAdd},
		{"readonly rootfs", hc.ReadonlyRootfs, hc.ReadonlyRootfs},
		{"no-new-privileges", len(hc.SecurityOpt) == 1 && hc.SecurityOpt[0] == "no-new-privileges", hc.SecurityOpt},
		{"not privileged", !hc.Privileged, hc.Privileged},
		{"memory", hc.Memory == spec.Memory, hc.Memory},
		{"cpus", hc.NanoCPUs == 0 && hc.CPUPeriod == 10_000 && hc.CPUQuota == 10_000, [3]int64{hc.NanoCPUs, hc.CPUPeriod, hc.CPUQuota}},
		{"pids", hc.PidsLimit != nil && *hc.PidsLimit == spec.Pids, hc.PidsLimit},
		{"user", c.Config.User == "1000:1000", c.Config.User},
		{"tmpfs /tmp", strings.Contains(hc.Tmpfs["/tmp"], "size=64m"), hc.Tmpfs},
		{"labels", c.Config.Labels[LabelManaged] == "true" && c.Config.Labels[LabelAgent] == spec.Agent && c.Config.Labels[LabelSpec] != "", c.Config.Labels},
		{"name", c.Name == "/"+testMgr.ContainerName(spec.Agent) && c.Config.Labels[LabelInstance] == testMgr.Instance(), c.Name},
		{"init command", strings.Join(append([]string{c.Path}, c.Args...), " ") == "/tools/toolgate-client init", c.Path},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s: got %v", ch.name, ch.got)
		}
	}
	mounts := map[string]bool{}
	for _, m := range c.Mounts {
		mounts[m.Destination] = m.RW
	}
	for dst, rw := range map[string]bool{"/workspace": true, "/tools/toolgate-client": false, "/tools/toolgate-launch": false, "/tools/bin": false} {
		if got, ok := mounts[dst]; !ok || got != rw {
			t.Errorf("mount %s: present=%v rw=%v, want rw=%v", dst, ok, got, rw)
		}
	}
	// And as the process sees it.
	r := mustRun(t, sb, "id", "-u")
	if strings.TrimSpace(r.stdout) != "1000" {
		t.Errorf("id -u = %q", r.stdout)
	}
	r = mustRun(t, sb, "touch", "/newfile")
	if r.out.ExitCode == 0 || !strings.Contains(r.stderr, "Read-only") {
		t.Errorf("touch /newfile: exit %d, %q", r.out.ExitCode, r.stderr)
	}
	if fi, err := os.Stat(spec.ToolsBinDir()); err != nil || !fi.IsDir() {
		t.Errorf("tools/bin dir on the host: %v", err)
	}
}

// TestCPULimit checks the CFS bandwidth the sandbox really gets, as the
// kernel holds it for the container (read from the host) and as a program
// inside sees it: the configured cpus over a 10 ms period. A changed cpus
// is a changed sandbox.
func TestCPULimit(t *testing.T) {
	spec, sb := newAgent(t, func(s *sandbox.AgentSpec) { s.CPUs = 1.5 })
	// Whichever cgroup version the host runs, as "QUOTA PERIOD".
	inside := []string{"sh", "-c", `if [ -e /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max; ` +
		`else echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); fi`}
	check := func(want string) {
		t.Helper()
		if r := mustRun(t, sb, inside...); strings.TrimSpace(r.stdout) != want {
			t.Errorf("inside the sandbox: cpu limit %q (%s), want %q", r.stdout, r.stderr, want)
		}
		got, err := cgroup.Limit(inspect(t, sb.ContainerID()).State.Pid)
		if err != nil || got != want {
			t.Errorf("the container's cgroup: %q %v, want %q", got, err, want)
		}
	}
	check("15000 10000")

	old := sb.ContainerID()
	spec.CPUs = 0.05 // under 0.1: Docker's 100 ms period, same share
	if _, err := testMgr.Ensure(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if sb.ContainerID() == old {
		t.Fatal("a changed cpus re-attached the old sandbox")
	}
	check("5000 100000")
}

func TestEnsureReattachesAcrossManagers(t *testing.T) {
	spec, sb := newAgent(t)
	mustRun(t, sb, "sh", "-c", "echo kept > /workspace/kept.txt")

	m2, err := New(context.Background(), Options{Instance: testInstance()})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	sb2, err := m2.Ensure(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if sb2.ContainerID() != sb.ContainerID() {
		t.Fatalf("second manager created %s, want re-attach to %s", sb2.ContainerID(), sb.ContainerID())
	}
	m2.SetSpecs([]sandbox.AgentSpec{spec})
	st, err := m2.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].ContainerID != sb.ContainerID() || st[0].State != "running" || st[0].StartedAt.IsZero() || st[0].Image != spec.Image {
		t.Fatalf("status: %+v", st)
	}

	// A changed spec recreates the container over the same workspace.
	spec.Memory = 300 << 20
	sb3, err := m2.Ensure(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if sb3.ContainerID() == sb.ContainerID() {
		t.Fatal("spec changed but the container was re-attached")
	}
	r := mustRun(t, sb3, "cat", "/workspace/kept.txt")
	if r.stdout != "kept\n" {
		t.Fatalf("workspace after recreate: %q", r.stdout)
	}
}

func TestRecreatedAfterKill(t *testing.T) {
	spec, sb := newAgent(t)
	ctx := context.Background()
	mustRun(t, sb, "sh", "-c", "echo before > /workspace/f")
	if _, err := testMgr.Client().ContainerKill(ctx, sb.ContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	waitNotRunning(t, sb.ContainerID())

	testMgr.SetSpecs([]sandbox.AgentSpec{spec})
	got, err := testMgr.Sandbox(ctx, spec.Agent)
	if err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, got.(*Sandbox), "cat", "/workspace/f")
	if r.out.ExitCode != 0 || r.stdout != "before\n" {
		t.Fatalf("after kill: exit %d, %q %q", r.out.ExitCode, r.stdout, r.stderr)
	}
	if !inspect(t, sb.ContainerID()).State.Running {
		t.Fatal("container not running after the call")
	}

	// Removed outright: Ensure creates a new one.
	if err := testMgr.Remove(ctx, spec.Agent); err != nil {
		t.Fatal(err)
	}
	old := sb.ContainerID()
	r = mustRun(t, sb, "cat", "/workspace/f")
	if r.stdout != "before\n" || sb.ContainerID() == old {
		t.Fatalf("after remove: %q, id %s (old %s)", r.stdout, sb.ContainerID(), old)
	}

	// A file read also brings back a removed sandbox.
	if err := testMgr.Remove(ctx, spec.Agent); err != nil {
		t.Fatal(err)
	}
	old = sb.ContainerID()
	f, err := sb.ReadFile(ctx, "/workspace/f", -1)
	if err != nil || string(f.Data) != "before\n" || sb.ContainerID() == old {
		t.Fatalf("read after remove: %v, id %s (old %s)", err, sb.ContainerID(), old)
	}
}

func waitNotRunning(t *testing.T, id string) {
	t.Helper()
	w := testMgr.Client().ContainerWait(context.Background(), id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case err := <-w.Error:
		t.Fatal(err)
	}
}

func TestExec(t *testing.T) {
	_, sb := newAgent(t)
	tests := []struct {
		name           string
		spec           gateway.ExecSpec
		code           int
		stdout, stderr string
	}{
		{"exit code and streams", gateway.ExecSpec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}}, 3, "out\n", "err\n"},
		{"argv is not a shell", gateway.ExecSpec{Argv: []string{"echo", "$(id)", "a b", `"q'`}}, 0, "$(id) a b \"q'\n", ""},
		{"stdin", gateway.ExecSpec{Argv: []string{"sh", "-c", "wc -c; cat >/dev/null"}, Stdin: strings.NewReader(strings.Repeat("x", 100000))}, 0, "100000\n", ""},
		{"no stdin reads /dev/null", gateway.ExecSpec{Argv: []string{"readlink", "/proc/self/fd/0"}}, 0, "/dev/null\n", ""},
		{"cwd and env", gateway.ExecSpec{Argv: []string{"sh", "-c", "pwd; echo $FOO; echo $TOOLGATE_CALL_ID"}, Cwd: "/tmp", Env: []string{"FOO=bar"}, CallID: "call-1"}, 0, "/tmp\nbar\ncall-1\n", ""},
		{"signal exit", gateway.ExecSpec{Argv: []string{"sh", "-c", "kill -TERM $$"}}, 128 + 15, "", ""},
		{"not found", gateway.ExecSpec{Argv: []string{"no-such-command"}}, 127, "", "toolgate-client run: exec: \"no-such-command\": executable file not found in $PATH\n"},
		{"cwd missing", gateway.ExecSpec{Argv: []string{"pwd"}, Cwd: "/workspace/no-such-dir"}, 126, "", "toolgate-client run: chdir /workspace/no-such-dir: no such file or directory\n"},
		{"cwd a file", gateway.ExecSpec{Argv: []string{"pwd"}, Cwd: "/etc/hostname"}, 126, "", "toolgate-client run: chdir /etc/hostname: not a directory\n"},
	}
	for p, path := range execPaths {
		for _, tt := range tests {
			t.Run(path.name+"/"+tt.name, func(t *testing.T) {
				if sr, ok := tt.spec.Stdin.(*strings.Reader); ok {
					sr.Seek(0, io.SeekStart)
				}
				r := runVia(context.Background(), p, sb, tt.spec)
				if r.err != nil {
					t.Fatal(r.err)
				}
				if r.out.ExitCode != tt.code || r.stdout != tt.stdout || r.stderr != tt.stderr || r.out.TimedOut {
					t.Fatalf("got exit %d timedOut=%v stdout %q stderr %q; want %d %q %q",
						r.out.ExitCode, r.out.TimedOut, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
				}
			})
		}
	}
}

func TestTimeoutKillsTree(t *testing.T) {
	_, sb := newAgent(t)
	for p, path := range execPaths {
		t.Run(path.name, func(t *testing.T) {
			r := runVia(context.Background(), p, sb, gateway.ExecSpec{Argv: []string{"sh", "-c", "sleep 100 & sleep 100"}, Timeout: time.Second})
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !r.out.TimedOut || r.out.ExitCode != 124 || !strings.Contains(r.stderr, "timed out") {
				t.Fatalf("got %+v stderr %q", r.out, r.stderr)
			}
			assertNoSleep(t, sb)
		})
	}
}

func TestCancelKillsTree(t *testing.T) {
	_, sb := newAgent(t)
	for p, path := range execPaths {
		for _, stdin := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stdin=%v", path.name, stdin), func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel() // a failed subtest leaves no sleep to the next one
				// Its own call id: a record the previous subtest's call is
				// still removing must not pass for this one's.
				id := fmt.Sprintf("cancelme-%d-%v", p, stdin)
				spec := gateway.ExecSpec{Argv: []string{"sh", "-c", "sleep 100 & sleep 100"}, CallID: id}
				if stdin {
					// Never read, never ended: the executor is blocked feeding it.
					pr, pw := io.Pipe()
					defer pw.Close()
					go pw.Write(make([]byte, 1<<20))
					spec.Stdin = pr
				}
				done := make(chan execResult, 1)
				go func() { done <- runVia(ctx, p, sb, spec) }()
				waitForCall(t, sb, id)
				cancel()
				r := <-done
				if !errors.Is(r.err, context.Canceled) {
					t.Fatalf("got %v", r.err)
				}
				assertNoSleep(t, sb)
			})
		}
	}
}

// TestKillBeforeStart is a call cancelled before its run recorded its
// process group — on the Engine path, an exec still starting when the
// caller went away: the kill finds nothing to end, so it leaves a
// tombstone, and the call's command never runs.
func TestKillBeforeStart(t *testing.T) {
	spec, sb := newAgent(t)
	for p, path := range execPaths {
		t.Run(path.name, func(t *testing.T) {
			id := fmt.Sprintf("early-%d", p)
			ran := "ran-" + id
			sb.killCall(context.Background(), id)
			r := runVia(context.Background(), p, sb, gateway.ExecSpec{
				Argv:   []string{"sh", "-c", "touch /workspace/" + ran + "; sleep 100"},
				CallID: id, Timeout: 10 * time.Second,
			})
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.out.ExitCode != 137 || r.out.TimedOut {
				t.Fatalf("got exit %d timedOut=%v stderr %q; want 137, never started", r.out.ExitCode, r.out.TimedOut, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(spec.Workspace, ran)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the cancelled call ran: %v", err)
			}
			assertNoSleep(t, sb)
		})
	}
}

// waitForCall waits until the client recorded the call's process group
// (an Engine exec can take seconds to start on a loaded machine).
func waitForCall(t *testing.T, sb *Sandbox, id string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if mustRun(t, sb, "test", "-L", proto.CallsDir+"/"+id).out.ExitCode == 0 {
			return
		}
	}
	t.Fatalf("call %s never started", id)
}

// A killed process is reaped by the sandbox's init a moment later (and a
// cancelled call's group is killed as its connection goes), so a loaded
// machine gets a short while before what is left counts.
func assertNoSleep(t *testing.T, sb *Sandbox) {
	t.Helper()
	var r execResult
	for range 200 {
		if r = mustRun(t, sb, "ps", "-o", "pid,args"); !strings.Contains(r.stdout, "sleep") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("processes left:\n%s", r.stdout)
}

type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

func TestLargeOutputDrained(t *testing.T) {
	_, sb := newAgent(t)
	for _, path := range execPaths {
		t.Run(path.name, func(t *testing.T) {
			var out, errw countingWriter
			const size = 100 << 20
			res, err := path.exec(sb, context.Background(), &gateway.ExecSpec{
				Argv:   []string{"sh", "-c", fmt.Sprintf("yes 0123456789abcdef | head -c %d; echo done >&2", size)},
				Stdout: &out, Stderr: &errw,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 || out.n.Load() != size || errw.n.Load() != 5 {
				t.Fatalf("exit %d, stdout %d bytes, stderr %d bytes", res.ExitCode, out.n.Load(), errw.n.Load())
			}
		})
	}
}

// TestKilledMidCall: a sandbox killed or stopped under a call ends the
// call with an error that says so, never with an exit code the teardown
// gave the command (SIGTERM reaches the command and the executor at once;
// init kills the executor first, so it cannot report the command's 143).
func TestKilledMidCall(t *testing.T) {
	spec, sb := newAgent(t)
	for _, signal := range []string{"KILL", "TERM"} {
		for p, path := range execPaths {
			t.Run(signal+"/"+path.name, func(t *testing.T) {
				waitExecutor(t, sb)
				id := "victim-" + strings.ToLower(signal)
				done := make(chan execResult, 1)
				go func() {
					done <- runVia(context.Background(), p, sb, gateway.ExecSpec{Argv: []string{"sleep", "100"}, CallID: id})
				}()
				waitForCall(t, sb, id)
				if _, err := testMgr.Client().ContainerKill(context.Background(), sb.ContainerID(), client.ContainerKillOptions{Signal: signal}); err != nil {
					t.Fatal(err)
				}
				r := <-done
				want := "sandbox container for agent " + spec.Agent + " stopped during the call"
				if r.err == nil || !strings.Contains(r.err.Error(), want) {
					t.Fatalf("got %v, %+v; want %q", r.err, r.out, want)
				}
				// The next call brings the sandbox back.
				if r := mustRun(t, sb, "true"); r.out.ExitCode != 0 {
					t.Fatal(r.out)
				}
			})
		}
	}
}

func TestFilesRoundTrip(t *testing.T) {
	spec, sb := newAgent(t)
	ctx := context.Background()
	names := []string{
		"plain.txt",
		"with space.txt",
		`quo"te's.txt`,
		"new\nline.txt",
		"$(touch pwned).txt",
		"`id`;rm -rf x",
		"-dash.txt",
		"deep/er/dir with space/$(x)/f.txt",
		"ünïcødé.txt",
	}
	for _, n := range names {
		p := "/workspace/" + n
		data := []byte("content of " + n + "\x00\xff")
		if err := sb.WriteFile(ctx, p, data); err != nil {
			t.Fatalf("write %q: %v", n, err)
		}
		f, err := sb.ReadFile(ctx, p, -1)
		if err != nil {
			t.Fatalf("read %q: %v", n, err)
		}
		if !bytes.Equal(f.Data, data) || f.Size != int64(len(data)) {
			t.Fatalf("read %q: %q size %d", n, f.Data, f.Size)
		}
		fi, err := os.Stat(filepath.Join(spec.Workspace, n))
		if err != nil {
			t.Fatalf("on host: %v", err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
			t.Errorf("%q owned by %d:%d", n, st.Uid, st.Gid)
		}
	}
	// tmpfs paths: invisible to the archive API, served by argv execs.
	for _, p := range []string{"/tmp/plain", "/tmp/sub dir/$(touch pwned) \"q'\n.txt"} {
		data := []byte("tmpfs " + p + "\x00\xff")
		if err := sb.WriteFile(ctx, p, data); err != nil {
			t.Fatalf("write %q: %v", p, err)
		}
		if r := mustRun(t, sb, "cat", "--", p); r.stdout != string(data) {
			t.Fatalf("cat %q in the sandbox: %q %q", p, r.stdout, r.stderr)
		}
		f, err := sb.ReadFile(ctx, p, 5)
		if err != nil {
			t.Fatalf("read %q: %v", p, err)
		}
		if string(f.Data) != "tmpfs" || f.Size != int64(len(data)) || f.Mode != 0o644 {
			t.Fatalf("read %q: %q size %d mode %o", p, f.Data, f.Size, f.Mode)
		}
	}
	if r := mustRun(t, sb, "ls", "-A", "/tmp", "/tmp/sub dir"); strings.Contains(r.stdout, ".toolgate-tmp") {
		t.Fatalf("temp file left in /tmp:\n%s", r.stdout)
	}
	for _, p := range []string{"/tmp/pwned", "/tmp/sub dir/pwned", "/workspace/pwned"} {
		if mustRun(t, sb, "test", "-e", p).out.ExitCode == 0 {
			t.Fatalf("a file name was run through a shell: %s exists", p)
		}
	}
	if _, err := os.Stat(filepath.Join(spec.Workspace, "pwned")); err == nil {
		t.Fatal("a file name was run through a shell")
	}
	entries, _ := os.ReadDir(spec.Workspace)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".toolgate-tmp-") {
			t.Errorf("temp file left: %s", e.Name())
		}
	}

	// Replace keeps the mode; limit cuts the data, not the size.
	mustRun(t, sb, "chmod", "755", "/workspace/plain.txt")
	if err := sb.WriteFile(ctx, "/workspace/plain.txt", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	f, err := sb.ReadFile(ctx, "/workspace/plain.txt", 4)
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Data) != "0123" || f.Size != 10 || f.Mode != 0o755 {
		t.Fatalf("limited read: %q size %d mode %o", f.Data, f.Size, f.Mode)
	}
}

// BenchmarkExecTrue measures one exec of `true` on each path, as p50/p99:
//
//	go test ./internal/host/sandbox/docker -run '^$' -bench ExecTrue -benchtime 200x
func BenchmarkExecTrue(b *testing.B) {
	_, sb := newAgent(b)
	ctx := context.Background()
	for _, path := range execPaths {
		b.Run(path.name, func(b *testing.B) {
			timing.Run(b, func() error {
				out, err := path.exec(sb, ctx, &gateway.ExecSpec{Argv: []string{"true"}, Stdout: io.Discard, Stderr: io.Discard})
				if err == nil && out.ExitCode != 0 {
					err = fmt.Errorf("exit %d", out.ExitCode)
				}
				return err
			})
		})
	}
}

var errSinkBroken = errors.New("sink broken")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errSinkBroken }

// When the caller's output writer fails the call ends with the writer's
// own error on both paths (the sandbox is fine: no check of whether it
// stopped), and its process tree ends with it: nothing is left running
// unwatched.
func TestBrokenOutputKillsTree(t *testing.T) {
	_, sb := newAgent(t)
	for _, path := range execPaths {
		t.Run(path.name, func(t *testing.T) {
			_, err := path.exec(sb, context.Background(), &gateway.ExecSpec{
				Argv:   []string{"sh", "-c", "echo hi; sleep 100 & sleep 100"},
				CallID: "broken", Stdout: failingWriter{}, Stderr: io.Discard,
			})
			if err != errSinkBroken {
				t.Fatalf("a broken output writer: %v, want the writer's error as it is", err)
			}
			assertNoSleep(t, sb)
		})
	}
}

// TestClaudeManagedSettingsMounted: every sandbox has Claude Code's managed
// settings registering the gate, and the sandbox user can neither change,
// replace nor add to them.
func TestClaudeManagedSettingsMounted(t *testing.T) {
	_, sb := newAgent(t)
	file := hooks.ManagedSettingsDir + "/" + hooks.ManagedSettingsFile
	r := mustRun(t, sb, "cat", file)
	var doc struct {
		AllowManagedHooksOnly bool                         `json:"allowManagedHooksOnly"`
		Hooks                 map[string][]json.RawMessage `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || !doc.AllowManagedHooksOnly ||
		len(doc.Hooks[hooks.EventPreToolUse]) != 1 || !strings.Contains(r.stdout, proto.ClientPath) {
		t.Fatalf("managed settings: %v\n%s", err, r.stdout)
	}
	for _, argv := range [][]string{
		{"sh", "-c", `echo '{"disableAllHooks":true}' > ` + file},
		{"rm", "-f", file},
		{"mv", file, "/tmp/x"},
		{"mkdir", hooks.ManagedSettingsDir + "/managed-settings.d"},
		{"touch", hooks.ManagedSettingsDir + "/other.json"},
	} {
		if r := mustRun(t, sb, argv...); r.out.ExitCode == 0 {
			t.Errorf("%q succeeded", argv)
		}
	}
	if again := mustRun(t, sb, "cat", file); again.stdout != r.stdout {
		t.Fatalf("managed settings changed:\n%s", again.stdout)
	}
	mounts := mustRun(t, sb, "cat", "/proc/mounts").stdout
	var line string
	for _, l := range strings.Split(mounts, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[1] == hooks.ManagedSettingsDir {
			line = l
		}
	}
	if !strings.Contains(" "+strings.Fields(line + " x x x")[3]+",", " ro,") {
		t.Fatalf("%s is not mounted read-only: %q", hooks.ManagedSettingsDir, line)
	}
}

// Calls beyond the sandbox's limit wait their turn: Status counts them,
// and they run once places are free.
func TestCallsWaitTheirTurn(t *testing.T) {
	spec, sb := newAgent(t)
	ctx := context.Background()
	mustRun(t, sb, "true") // the executor is up
	limit := sandbox.QueueLimit(spec.CPUs)
	var held []func()
	for range limit {
		leave, err := sb.h.Queue().Enter(ctx, limit, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, leave)
	}
	results := make(chan execResult, 3)
	for range 3 {
		go func() { results <- run(ctx, sb, gateway.ExecSpec{Argv: []string{"echo", "ran"}}) }()
	}
	waiting := func() int {
		st, err := testMgr.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Agent == spec.Agent {
				return s.Waiting
			}
		}
		t.Fatalf("no status for %s", spec.Agent)
		return 0
	}
	for deadline := time.Now().Add(time.Minute); waiting() != 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Status shows %d calls waiting, want 3", waiting())
		}
	}
	select {
	case r := <-results:
		t.Fatalf("a call ran while every place was held: %+v", r)
	default:
	}
	time.Sleep(30 * time.Millisecond) // every waiting call has waited at least this long
	for _, leave := range held {
		leave()
	}
	for range 3 {
		if r := <-results; r.err != nil || r.out.ExitCode != 0 || r.stdout != "ran\n" || r.out.Queued < 30*time.Millisecond {
			t.Fatalf("a call that waited: %+v %+v", r, r.out)
		}
	}
	if n := waiting(); n != 0 {
		t.Fatalf("%d calls still waiting", n)
	}
}
