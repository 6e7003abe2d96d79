package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/daemon"
	"github.com/toolgate/toolgate/internal/host/kubeagents"
	"github.com/toolgate/toolgate/internal/host/sandbox/kube"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/wait"
)

// TestServeAgentResources runs `toolgate serve` with the kubernetes backend
// on the real cluster: an Agent applied as a resource gets a pod on the
// gateway's node, core tools and a plugin call from inside the pod work
// through the gateway, a denied call is denied, the Agent's status shows
// the pod, calls and denials (as `kubectl get agents` prints them); an
// Agent the gateway cannot take is Failed with its reason; an Agent
// deleted loses its pod.
func TestServeAgentResources(t *testing.T) {
	c := kube.NeedCluster(t)
	dyn := c.Apply(t)
	ctx := context.Background()
	const inst = "srv"
	agents := dyn.Resource(kubeagents.Resource).Namespace(c.Namespace())

	home := t.TempDir()
	links, err := os.MkdirTemp("", "tgl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(links) })
	// The admin API on loopback TCP too, for the CLI's --context.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`gateway:
  listen: %s
  sandbox:
    backend: kubernetes
    kubernetes:
      kubeconfig: %s
      namespace: %s
      node: %s
      instance: %s
      kubeletDir: %s
      socketLinks: %s
      storageClass: %s
      pullPolicy: Never
      startTimeout: 2m
plugins:
  echo: {kind: builtin, builtin: toolgate-echo}
`, admin, filepath.Join(c.Dir(), "run", "pki", "admin.kubeconfig"), c.Namespace(), c.Node(), inst,
		filepath.Join(c.Dir(), "run", "var-lib", "kubelet"), links, c.StorageClass())
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := auth.OpenStore(filepath.Join(home, auth.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := store.Create(auth.ScopeAdmin, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, api.TokenFile), []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	// An Agent a gateway on a node that is gone had: this gateway takes it over.
	c.Volume(t, inst, "moved")
	moved := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "toolgate.dev/v1alpha1", "kind": "Agent", "metadata": map[string]any{"name": "moved"},
		"spec": map[string]any{"image": c.Image()},
	}}
	if moved, err = agents.Create(ctx, moved, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moved.Object["status"] = map[string]any{"node": "node-gone", "phase": "Running", "pod": "tg-srv-moved", "calls": int64(41)}
	if _, err := agents.UpdateStatus(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(ctx, daemon.Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Shutdown(context.Background()) })

	const name = "demo"
	c.Volume(t, inst, name)
	agent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "toolgate.dev/v1alpha1", "kind": "Agent", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"image": c.Image(), "tools": []any{"echo"}, "limits": map[string]any{"memory": "256Mi"},
			"rules": []any{map[string]any{"name": "no-forbidden", "deny": `tool == "exec" && "forbidden" in argv`, "reason": "a test's denial"}}},
	}}
	if _, err := agents.Create(ctx, agent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, agents, name, func(st map[string]any) bool { return st["phase"] == kubeagents.PhaseRunning })
	pod := kube.PodName(inst, name)
	if st["pod"] != pod || st["node"] != c.Node() {
		t.Fatalf("status: %v, want pod %s on %s", st, pod, c.Node())
	}

	st = waitStatus(t, agents, "moved", func(st map[string]any) bool {
		return st["node"] == c.Node() && st["phase"] == kubeagents.PhaseRunning
	})
	if num(st["calls"]) != 41 {
		t.Errorf("the moved Agent's calls: %v, want the 41 it had", st["calls"])
	}
	if err := agents.Delete(ctx, "moved", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	cl, err := adminclient.Dial(home)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		tool   string
		args   map[string]any
		want   string
		denied bool
	}{
		{"write", map[string]any{"path": "/workspace/n.txt", "content": "from the resource\n"}, "", false},
		{"read", map[string]any{"path": "/workspace/n.txt"}, "from the resource", false},
		{"exec", map[string]any{"argv": []string{"sh", "-c", "echo hi"}}, "hi", false},
		{"exec", map[string]any{"argv": []string{"/tools/bin/echo", "plugin", "from the pod"}}, "from the pod", false},
		{"exec", map[string]any{"argv": []string{"echo", "forbidden"}}, "", true},
	}
	for _, s := range steps {
		res, err := cl.Call(ctx, name, s.tool, s.args, nil, nil)
		var denied *api.Error
		switch {
		case s.denied && (!errors.As(err, &denied) || denied.Code != "denied" || denied.Rule != "no-forbidden"):
			t.Errorf("%s %v: got %v, want a denial", s.tool, s.args, err)
		case !s.denied && err != nil:
			t.Errorf("%s %v: %v", s.tool, s.args, err)
		case !s.denied && !strings.Contains(fmt.Sprint(res.Output), s.want):
			t.Errorf("%s %v: got %v, want ~%q", s.tool, s.args, res.Output, s.want)
		}
	}
	// 5 calls, 1 denied, and the plugin call from inside the pod.
	st = waitStatus(t, agents, name, func(st map[string]any) bool {
		return num(st["calls"]) >= 6 && num(st["denials"]) >= 1
	})
	if num(st["denials"]) != 1 {
		t.Errorf("status: %v, want 1 denial", st)
	}
	out, err := exec.Command(filepath.Join(c.Dir(), "bin", "kubectl"), "--kubeconfig", filepath.Join(c.Dir(), "run", "pki", "admin.kubeconfig"),
		"-n", c.Namespace(), "get", "agents").CombinedOutput()
	if err != nil || !strings.Contains(string(out), pod) || !strings.Contains(string(out), "Running") {
		t.Errorf("kubectl get agents: %v\n%s", err, out)
	}
	t.Logf("kubectl get agents:\n%s", out)

	// The same CLI reaches this gateway through a context (as it would a
	// gateway in the cluster through kubectl port-forward).
	toolgate, _ := testenv.Binaries(t)
	other := t.TempDir()
	ctxDir := filepath.Join(other, "contexts", "k8s")
	if err := os.MkdirAll(ctxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "address"), []byte(admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, api.TokenFile), []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		out, err := exec.Command(toolgate, append([]string{"--home", other}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := cli("--context", "k8s", "exec", name, "--", "sh", "-c", "echo hi from the context"); err != nil || !strings.Contains(out, "hi from the context") {
		t.Errorf("toolgate --context k8s exec: %v\n%s", err, out)
	}
	for _, bad := range []struct{ context, want string }{
		{"nope", "context nope"},
		{"../k8s", "a context is a name, not a path"},
	} {
		if out, err := cli("--context", bad.context, "agents"); err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("--context %s: %v, want an error naming %q\n%s", bad.context, err, bad.want, out)
		}
	}

	// An Agent the CRD admits but the gateway cannot take: its tool is no
	// plugin of this gateway's.
	bad := agent.DeepCopy()
	bad.SetName("unknown-tool")
	_ = unstructured.SetNestedStringSlice(bad.Object, []string{"nope"}, "spec", "tools")
	if _, err := agents.Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, agents, "unknown-tool", func(st map[string]any) bool { return st["phase"] == kubeagents.PhaseFailed })
	if msg, _ := st["lastError"].(string); !strings.Contains(msg, `spec.tools[0]: tool "nope" is not declared under plugins`) {
		t.Errorf("lastError: %q", msg)
	}
	// One the CRD refuses never reaches a gateway.
	root := agent.DeepCopy()
	root.SetName("root")
	_ = unstructured.SetNestedField(root.Object, "0:0", "spec", "user")
	if _, err := agents.Create(ctx, root, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a root Agent: %v, want refused as invalid", err)
	}

	// The good agent still works beside the failed one; deleting it takes
	// its pod.
	if _, err := cl.Call(ctx, name, "exec", map[string]any{"argv": []string{"true"}}, nil, nil); err != nil {
		t.Errorf("after a failed Agent: %v", err)
	}
	if err := agents.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted Agent's pod to go", func() bool {
		_, err := c.Client().CoreV1().Pods(c.Namespace()).Get(ctx, pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := cl.Call(ctx, name, "exec", map[string]any{"argv": []string{"true"}}, nil, nil); err == nil {
		t.Error("a call of a deleted Agent ran")
	}
}

// patience is how long the cluster may take to act on a loaded machine.
const patience = 3 * time.Minute

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	if !wait.Until(patience, ok) {
		t.Fatalf("waited %s for %s", patience, what)
	}
}

func waitStatus(t *testing.T, agents interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
}, name string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	var st map[string]any
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Agent %s's last status: %v", name, st)
		}
	})
	waitFor(t, "Agent "+name+"'s status", func() bool {
		a, err := agents.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		st, _, _ = unstructured.NestedMap(a.Object, "status")
		return st != nil && ok(st)
	})
	return st
}

func num(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}
