package kube

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
)

type execResult struct {
	out            *gateway.ExecOutcome
	stdout, stderr string
	err            error
}

type execFunc func(context.Context, *gateway.ExecSpec) (*gateway.ExecOutcome, error)

func run(ctx context.Context, f execFunc, spec gateway.ExecSpec) execResult {
	var o, e bytes.Buffer
	spec.Stdout, spec.Stderr = &o, &e
	out, err := f(ctx, &spec)
	return execResult{out, o.String(), e.String(), err}
}

// waitExecutor waits until the pod's warm executor answers.
func waitExecutor(t testing.TB, sb *Sandbox) {
	t.Helper()
	_, uid, spec := sb.current()
	user, _, _ := sandbox.ParseUser(spec.UserOrDefault())
	for i := 0; i < 200; i++ {
		if c, err := hostexec.Dial(context.Background(), sb.m.VolumeDir(uid, VolExec), user); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the warm executor never answered")
}

// viaExecutorOnly is Exec on the warm executor alone: it fails rather than
// fall back, so a pass shows the executor ran the call.
func (s *Sandbox) viaExecutorOnly(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
	req := &proto.ExecRequest{Argv: spec.Argv, Cwd: spec.Cwd, Env: spec.Env, CallID: cmp.Or(spec.CallID, gateway.NewID())}
	stdout, stderr := spec.Outputs()
	return s.viaExecutor(ctx, req, spec.Stdin, stdout, stderr, spec.Timeout)
}

// TestPodLifecycle: a pod created for an agent runs under Pod Security
// restricted; exec and file I/O work through pods/exec and through the
// warm executor; a second manager (a restarted gateway) adopts the pod; a
// changed spec recreates it on the same workspace; a pod deleted under a
// call ends the call with a clear error and comes back on the next one.
func TestPodLifecycle(t *testing.T) {
	c := needCluster(t)
	m := c.manager(t, "life")
	spec := c.agent(t, m, "")
	ctx := context.Background()
	sb, err := m.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	name, uid := sb.Pod()

	// No traffic in or out: the NetworkPolicy selects the pod and allows nothing.
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := c.cs.NetworkingV1().NetworkPolicies(c.ns).Get(ctx, m.NetworkPolicy().Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) || len(np.Spec.Ingress)+len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 {
		t.Fatalf("network policy %+v does not deny the pod everything (%v)", np.Spec, err)
	}

	paths := []struct {
		name string
		exec execFunc
	}{{"pods/exec", sb.ExecThroughAPI}, {"executor", sb.viaExecutorOnly}}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			if p.name == "executor" {
				waitExecutor(t, sb)
			}
			tests := []struct {
				name   string
				spec   gateway.ExecSpec
				code   int
				stdout string
			}{
				{"user and workspace", gateway.ExecSpec{Argv: []string{"sh", "-c", "id -u; pwd"}}, 0, "1000\n/workspace\n"},
				{"cwd and env", gateway.ExecSpec{Argv: []string{"sh", "-c", "pwd; echo $TG_X"}, Cwd: "/tmp", Env: []string{"TG_X=a b"}}, 0, "/tmp\na b\n"},
				{"exit code", gateway.ExecSpec{Argv: []string{"sh", "-c", "exit 7"}}, 7, ""},
				{"stdin", gateway.ExecSpec{Argv: []string{"cat"}, Stdin: strings.NewReader("piped")}, 0, "piped"},
				{"literal argv", gateway.ExecSpec{Argv: []string{"echo", "$(id)", ";", "`id`"}}, 0, "$(id) ; `id`\n"},
				{"timeout", gateway.ExecSpec{Argv: []string{"sleep", "30"}, Timeout: 300 * time.Millisecond}, 124, ""},
				{"read-only root", gateway.ExecSpec{Argv: []string{"sh", "-c", "touch /etc/x 2>/dev/null || echo refused"}}, 0, "refused\n"},
				{"no service-account token", gateway.ExecSpec{Argv: []string{"sh", "-c", "test -e /var/run/secrets/kubernetes.io || echo none"}}, 0, "none\n"},
			}
			for _, tt := range tests {
				r := run(ctx, p.exec, tt.spec)
				if r.err != nil || r.out.ExitCode != tt.code || r.stdout != tt.stdout {
					t.Errorf("%s: got %v %+v %q %q, want %d %q", tt.name, r.err, r.out, r.stdout, r.stderr, tt.code, tt.stdout)
				}
			}
		})
	}

	// A caller's writer that fails ends the call with that writer's own
	// error, and its process tree with it, on both paths.
	t.Run("broken output writer", func(t *testing.T) {
		for _, p := range paths {
			waitExecutor(t, sb)
			// A guard, not a timing: a call that streams on until its
			// command ends runs into it and fails with its error.
			guard, cancel := context.WithTimeout(ctx, 50*time.Second)
			_, err := p.exec(guard, &gateway.ExecSpec{Argv: []string{"sh", "-c", "echo hi; sleep 100 & sleep 100"},
				CallID: "broken-" + strings.ReplaceAll(p.name, "/", "-"), Stdout: failingWriter{}, Stderr: io.Discard})
			cancel()
			if err != errSinkBroken {
				t.Fatalf("%s: %v, want the writer's error as it is", p.name, err)
			}
			var left string
			for range 50 {
				r := run(ctx, sb.Exec, gateway.ExecSpec{Argv: []string{"ps", "-o", "args"}})
				if left = r.stdout; !strings.Contains(left, "sleep 100") {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if strings.Contains(left, "sleep 100") {
				t.Fatalf("%s: the call's processes outlived it:\n%s", p.name, left)
			}
		}
	})

	t.Run("files", func(t *testing.T) {
		if err := sb.WriteFile(ctx, "/workspace/d/f.txt", []byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		f, err := sb.ReadFile(ctx, "/workspace/d/f.txt", 3)
		if err != nil || string(f.Data) != "hel" || f.Size != 6 {
			t.Fatalf("read: %v %+v", err, f)
		}
		if _, err := sb.ReadFile(ctx, "relative", -1); err == nil || !strings.Contains(err.Error(), "not absolute") {
			t.Fatalf("relative path: %v", err)
		}
		if _, err := sb.ReadFile(ctx, "/workspace/missing", -1); err == nil {
			t.Fatal("read a missing file")
		}
	})

	t.Run("adopted by a restarted gateway", func(t *testing.T) {
		m2 := c.manager(t, "life")
		sb2, err := m2.Ensure(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, uid2 := sb2.Pod(); uid2 != uid {
			t.Fatalf("pod %s replaced by %s", uid, uid2)
		}
		if r := run(ctx, sb2.Exec, gateway.ExecSpec{Argv: []string{"cat", "/workspace/d/f.txt"}}); r.err != nil || r.stdout != "hello\n" {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("changed spec recreates the pod on the same workspace", func(t *testing.T) {
		spec.Memory = 256 << 20
		if err := m.SetSpecs([]sandbox.AgentSpec{spec}); err != nil {
			t.Fatal(err)
		}
		got, err := m.Sandbox(ctx, spec.Agent)
		if err != nil {
			t.Fatal(err)
		}
		if _, uid2 := got.(*Sandbox).Pod(); uid2 == uid {
			t.Fatal("pod not recreated")
		}
		_, uid = sb.Pod()
		if r := run(ctx, sb.Exec, gateway.ExecSpec{Argv: []string{"cat", "/workspace/d/f.txt"}}); r.err != nil || r.stdout != "hello\n" {
			t.Fatalf("workspace after recreation: %+v", r)
		}
	})

	t.Run("pod deleted under a call", func(t *testing.T) {
		for _, p := range paths {
			waitExecutor(t, sb)
			done := make(chan execResult, 1)
			go func() { done <- run(ctx, p.exec, gateway.ExecSpec{Argv: []string{"sleep", "60"}}) }()
			time.Sleep(time.Second)
			zero := int64(0)
			name, old := sb.Pod()
			if err := c.cs.CoreV1().Pods(c.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
			var r execResult
			select {
			case r = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("%s: the call did not end when its pod was deleted", p.name)
			}
			if !errors.Is(r.err, sandbox.ErrGone) {
				t.Fatalf("%s: got %v %+v, want an error naming the pod gone", p.name, r.err, r.out)
			}
			t.Logf("%s: %v", p.name, r.err)
			// The next call brings the sandbox back, workspace intact.
			r = run(ctx, sb.Exec, gateway.ExecSpec{Argv: []string{"cat", "/workspace/d/f.txt"}})
			if _, now := sb.Pod(); r.err != nil || r.stdout != "hello\n" || now == old {
				t.Fatalf("%s: after the pod went: %+v (pod %s → %s)", p.name, r, old, now)
			}
		}
	})
}

// TestRestrictedEnforced: the namespace the tests use enforces Pod
// Security restricted (the sandbox pods above passed it); a pod that
// drops less is refused there, so the check is real.
func TestRestrictedEnforced(t *testing.T) {
	c := needCluster(t)
	m := c.manager(t, "psa")
	pod, err := m.podFor(sandbox.AgentSpec{Agent: "x", Image: c.img})
	if err != nil {
		t.Fatal(err)
	}
	mutations := map[string]func(p *corev1.Pod){
		"capabilities kept":    func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Capabilities = nil },
		"privilege escalation": func(p *corev1.Pod) { yes := true; p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &yes },
		"no seccomp": func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile, p.Spec.Containers[0].SecurityContext.SeccompProfile = nil, nil
		},
		"root": func(p *corev1.Pod) { zero := int64(0); p.Spec.SecurityContext.RunAsUser = &zero },
	}
	for name, mutate := range mutations {
		p := pod.DeepCopy()
		p.Name = "psa-" + strings.ReplaceAll(name, " ", "-")
		mutate(p)
		_, err := c.cs.CoreV1().Pods(c.ns).Create(context.Background(), p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "restricted") {
			t.Errorf("%s: admitted (%v)", name, err)
		}
	}
	if _, err := c.cs.CoreV1().Pods(c.ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the sandbox pod itself: %v", err)
	}
	if _, err := m.podFor(sandbox.AgentSpec{Agent: "x", Image: c.img, User: "0:0"}); err == nil {
		t.Fatal("a root sandbox user was accepted")
	}
}

var errSinkBroken = errors.New("sink broken")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errSinkBroken }
