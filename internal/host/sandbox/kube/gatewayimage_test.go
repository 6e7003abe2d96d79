package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/tmpdir"
)

// TestGatewayImage builds the gateway's image offline, imports it into the
// cluster's containerd, runs toolgate-gateway from it in a pod, and has the
// API server check deploy/kubernetes/gateway.yaml (a server-side dry run:
// the DaemonSet itself is not run here — see docs/kubernetes.md).
func TestGatewayImage(t *testing.T) {
	c := needCluster(t)
	dyn := applyManifests(t, c)
	ctx := context.Background()
	_, client := testenv.Binaries(t)
	dir := filepath.Dir(client)
	p, err := rootfs.Lookup("default")
	if err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("toolgate.test/gateway:%d", os.Getpid())
	f, err := os.CreateTemp(tmpdir.For(t), "gateway-*.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bins := Binaries{Client: client, Launcher: filepath.Join(dir, "toolgate-launch"), Gateway: filepath.Join(dir, "toolgate-gateway")}
	if err := WriteImage(ctx, f, ref, p, rootfs.Env{}, bins); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(c.dir, "run", "containerd", "containerd.sock")
	if out, err := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "import", f.Name()).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "rm", ref).Run() })

	// The image runs its gateway (here as a restricted pod, asked for its help).
	no, yes, uid := false, true, int64(1000)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway-image"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "gateway", Image: ref, ImagePullPolicy: corev1.PullNever, Command: []string{GatewayPath, "--help"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	pods := c.cs.CoreV1().Pods(c.ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) })
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase == corev1.PodSucceeded {
			break
		}
		if got.Status.Phase == corev1.PodFailed || time.Now().After(deadline) {
			t.Fatalf("the gateway image's pod: %s %s", got.Status.Phase, waitingReason(got))
		}
		time.Sleep(200 * time.Millisecond)
	}
	logs, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{}).Do(ctx).Raw()
	if err != nil || !strings.Contains(string(logs), "serve") {
		t.Fatalf("toolgate-gateway --help in the image: %v\n%s", err, logs)
	}

	// The DaemonSet and its ConfigMap, checked by the API server.
	gvrs := map[string]schema.GroupVersionResource{
		"ConfigMap": {Version: "v1", Resource: "configmaps"},
		"DaemonSet": {Group: "apps", Version: "v1", Resource: "daemonsets"},
	}
	kinds := map[string]bool{}
	eachObject(t, "gateway.yaml", func(obj *unstructured.Unstructured) {
		ri := dyn.Resource(gvrs[obj.GetKind()]).Namespace(obj.GetNamespace())
		if _, err := ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
			t.Errorf("gateway.yaml: %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		kinds[obj.GetKind()] = true
	})
	if !kinds["ConfigMap"] || !kinds["DaemonSet"] {
		t.Errorf("gateway.yaml holds %v", kinds)
	}
}
