package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/tmpdir"
)

// The real single-node cluster scripts/kubernetes/up.sh starts (API
// server, etcd, scheduler, controller manager, kubelet, containerd):
// TOOLGATE_K8S_DIR names its state directory. scripts/test.sh starts it
// and sets that; without it these tests skip, except in CI (CI=true or
// TOOLGATE_REQUIRE_K8S=1), where they fail.
type cluster struct {
	dir  string
	cfg  *rest.Config
	cs   kubernetes.Interface
	ns   string
	node string
	img  string
}

var (
	clusterOnce sync.Once
	theCluster  *cluster
	clusterErr  error
)

const testStorageClass = "toolgate-test"

func needCluster(t testing.TB) *cluster {
	t.Helper()
	dir := os.Getenv("TOOLGATE_K8S_DIR")
	if dir == "" {
		if os.Getenv("CI") == "true" || os.Getenv("TOOLGATE_REQUIRE_K8S") == "1" {
			t.Fatal("TOOLGATE_K8S_DIR is not set: the Kubernetes tests need the cluster scripts/test.sh starts")
		}
		t.Skip("no Kubernetes cluster (set TOOLGATE_K8S_DIR to the state directory of scripts/kubernetes/up.sh)")
	}
	clusterOnce.Do(func() { theCluster, clusterErr = setUpCluster(t, dir) })
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return theCluster
}

func setUpCluster(t testing.TB, dir string) (*cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "run", "pki", "admin.kubeconfig"))
	if err != nil {
		return nil, fmt.Errorf("cluster in %s: %w", dir, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		return nil, fmt.Errorf("cluster in %s: no node: %v", dir, err)
	}
	c := &cluster{dir: dir, cfg: cfg, cs: cs, node: nodes.Items[0].Name, ns: fmt.Sprintf("tg-test-%d", os.Getpid())}
	// The namespace enforces Pod Security "restricted": the API server
	// itself refuses any sandbox pod that does not pass it.
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
	}}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating namespace: %w", err)
	}
	if c.img, err = importImage(ctx, t, dir); err != nil {
		return nil, err
	}
	return c, nil
}

// importImage builds the default profile's image with this tree's client
// and launcher and imports it into the cluster's containerd.
func importImage(ctx context.Context, t testing.TB, dir string) (string, error) {
	_, client := testenv.Binaries(t)
	p, err := rootfs.Lookup("default")
	if err != nil {
		return "", err
	}
	ref := fmt.Sprintf("toolgate.test/sandbox:%d", os.Getpid())
	f, err := os.CreateTemp(tmpdir.For(t), "image-*.tar")
	if err != nil {
		return "", err
	}
	defer f.Close()
	bins := Binaries{Client: client, Launcher: filepath.Join(filepath.Dir(client), "toolgate-launch")}
	if err := WriteImage(ctx, f, ref, p, rootfs.Env{}, bins); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", filepath.Join(dir, "run", "containerd", "containerd.sock"),
		"-n", "k8s.io", "images", "import", f.Name()).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr images import: %v: %s", err, out)
	}
	return ref, nil
}

// TestMain removes this run's namespace (pods, claims) and volumes.
func TestMain(m *testing.M) {
	code := testenv.Main(m)
	if c := theCluster; c != nil {
		ctx := context.Background()
		_ = c.cs.CoreV1().Namespaces().Delete(ctx, c.ns, metav1.DeleteOptions{})
		_ = c.cs.CoreV1().PersistentVolumes().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: "toolgate.test/run=" + c.ns})
		_ = exec.Command("ctr", "--address", filepath.Join(c.dir, "run", "containerd", "containerd.sock"),
			"-n", "k8s.io", "images", "rm", c.img).Run()
	}
	os.Exit(code)
}

// manager is a backend on the test cluster as instance inst.
func (c *cluster) manager(t testing.TB, inst string) *Manager {
	t.Helper()
	links, err := os.MkdirTemp("", "tgk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(links) })
	m, err := New(context.Background(), Options{
		SocketLinks: links,
		Config:      c.cfg, Namespace: c.ns, Instance: inst, Node: c.node,
		KubeletDir:   filepath.Join(c.dir, "run", "var-lib", "kubelet"),
		StorageClass: testStorageClass, PullPolicy: corev1.PullNever, StartTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// volume provides a workspace volume for agent's claim: a host directory
// (the node is this machine) owned by the sandbox user, bound to exactly
// that claim. A cluster would have a provisioner for this.
func (c *cluster) volume(t testing.TB, m *Manager, agent string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "tg-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	name := m.ClaimName(agent)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: c.ns + "-" + name, Labels: map[string]string{"toolgate.test/run": c.ns}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: m.size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              testStorageClass,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: c.ns, Name: name},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	if _, err := c.cs.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// agentSpec is a spec for a test agent named after the test.
func (c *cluster) agent(t testing.TB, m *Manager, suffix string, opts ...func(*sandbox.AgentSpec)) sandbox.AgentSpec {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 30 {
		name = name[:30]
	}
	spec := sandbox.AgentSpec{Agent: strings.Trim(name, "-") + suffix, Image: c.img}
	for _, o := range opts {
		o(&spec)
	}
	c.volume(t, m, spec.Agent)
	t.Cleanup(func() { _ = m.Remove(context.Background(), spec.Agent) })
	return spec
}
