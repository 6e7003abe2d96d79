// Package kube is the Kubernetes sandbox backend: one pod per agent,
// created, adopted or recreated from its spec like the Docker backend's
// containers, with its workspace on a PersistentVolumeClaim. The gateway
// runs on the pod's node (docs/kubernetes.md): it reaches the pod's agent
// and executor sockets in the pod's emptyDir volumes under the kubelet's
// directory, so a sandbox's identity is still the socket that accepted
// its connection. Exec goes to the warm executor, else through the
// pods/exec subresource; file I/O is toolgate-client get/put either way.
package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// DefaultKubeletDir is the kubelet's root directory on a node.
const DefaultKubeletDir = "/var/lib/kubelet"

// DefaultSocketLinks is the default of Options.SocketLinks.
const DefaultSocketLinks = "/run/toolgate-kube"

// DefaultWorkspaceSize is the size of a workspace claim this backend creates.
const DefaultWorkspaceSize = "1Gi"

// Options configure the backend.
type Options struct {
	// Config reaches the API server (rest.InClusterConfig in a pod, a
	// kubeconfig outside).
	Config *rest.Config
	// Namespace holds the sandbox pods and claims.
	Namespace string
	// Instance tells this gateway's pods from other gateways' in the
	// namespace; part of every name and label. Empty: "default".
	Instance string
	// Node is the node this gateway runs on; its pods are put there.
	Node string
	// KubeletDir is the kubelet's root directory as this process sees it;
	// empty: DefaultKubeletDir.
	KubeletDir string
	// SocketLinks is a directory of the gateway's (not a sandbox's) where
	// SocketPath puts a short link to each pod's socket volume: the
	// kubelet's path is longer than a Unix socket address may be. Empty:
	// DefaultSocketLinks.
	SocketLinks string
	// StorageClass of the workspace claims ("": the cluster's default).
	StorageClass string
	// WorkspaceSize of a new claim; empty: DefaultWorkspaceSize.
	WorkspaceSize string
	// PullPolicy of the sandbox image; empty: IfNotPresent.
	PullPolicy corev1.PullPolicy
	// StartTimeout bounds how long a new pod may take to run; 0: 2 minutes.
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Manager owns the agents' sandbox pods.
type Manager struct {
	cs         kubernetes.Interface
	cfg        *rest.Config
	ns         string
	instance   string
	node       string
	kubeletDir string
	links      string
	class      string
	size       resource.Quantity
	pull       corev1.PullPolicy
	startWait  time.Duration
	log        *slog.Logger

	agents *sandbox.Registry[Sandbox]

	mu     sync.Mutex
	policy bool // the NetworkPolicy is known to exist
	// An agent's socket is in its current pod's volume, so it is known
	// only once the pod runs, and moves when the pod is made anew:
	// socks holds each agent's, and serve (ServeSockets) is told of a move.
	socks map[string]sandbox.Socket
	serve func([]sandbox.Socket) error
	specs []sandbox.AgentSpec // the last SetSpecs'
}

var (
	_ sandbox.Backend     = (*Manager)(nil)
	_ sandbox.SocketMover = (*Manager)(nil)
)

// New connects to the API server and checks that the namespace exists.
func New(ctx context.Context, opts Options) (*Manager, error) {
	if opts.Config == nil {
		return nil, errors.New("kube: no API server configuration")
	}
	if opts.Instance == "" {
		opts.Instance = "default"
	}
	if !dnsLabel.MatchString(opts.Instance) || len(opts.Instance) > 16 {
		return nil, fmt.Errorf("kube: instance %q: want 1-16 lowercase letters, digits or -", opts.Instance)
	}
	if opts.Namespace == "" || opts.Node == "" {
		return nil, errors.New("kube: namespace and node are required")
	}
	size, err := resource.ParseQuantity(cmp.Or(opts.WorkspaceSize, DefaultWorkspaceSize))
	if err != nil {
		return nil, fmt.Errorf("kube: workspace size: %w", err)
	}
	cs, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, opts.Namespace, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("kube: namespace %s at %s: %w", opts.Namespace, opts.Config.Host, err)
	}
	m := &Manager{
		cs: cs, cfg: opts.Config, ns: opts.Namespace, instance: opts.Instance, node: opts.Node,
		kubeletDir: cmp.Or(opts.KubeletDir, DefaultKubeletDir), links: cmp.Or(opts.SocketLinks, DefaultSocketLinks), class: opts.StorageClass, size: size,
		pull: cmp.Or(opts.PullPolicy, corev1.PullIfNotPresent), startWait: opts.StartTimeout, log: opts.Logger,
		socks: map[string]sandbox.Socket{},
	}
	m.agents = sandbox.NewRegistry(func(agent string) *Sandbox {
		b := &Sandbox{m: m, agent: agent}
		b.h.MarkStale() // no pod until Ensure sets one
		return b
	})
	if m.startWait <= 0 {
		m.startWait = 2 * time.Minute
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	return m, nil
}

// Client is the API client, for diagnostics and tests.
func (m *Manager) Client() kubernetes.Interface { return m.cs }

// Instance is the id that names and labels this manager's pods.
func (m *Manager) Instance() string { return m.instance }

// PodName is the agent's pod in this instance.
func (m *Manager) PodName(agent string) string { return objectName(m.instance, agent, "") }

// ClaimName is the agent's workspace claim in this instance.
func (m *Manager) ClaimName(agent string) string { return objectName(m.instance, agent, "-ws") }

// SetSpecs installs the agents' specs. A sandbox whose spec changed is
// recreated on its next use, so calls in flight finish in the pod they
// started in; launchers follow the tools at once.
func (m *Manager) SetSpecs(specs []sandbox.AgentSpec) error {
	m.mu.Lock()
	m.specs = specs
	m.mu.Unlock()
	return m.agents.Configure(specs, func(b *Sandbox, s sandbox.AgentSpec, changed bool) error {
		if changed {
			b.h.MarkStale()
			return nil
		}
		if _, uid := b.Pod(); uid != "" && !b.h.Stale() {
			err := m.writeLaunchers(uid, s)
			if errors.Is(err, fs.ErrNotExist) {
				// Its pod was deleted underneath: a new one gets them.
				b.h.MarkStale()
				return nil
			}
			return err
		}
		return nil
	})
}

// Sandbox returns the agent's sandbox, creating, adopting or recreating its
// pod when it is missing, failed or out of date (Sync: a pod with calls in
// flight is recreated once they end, and the call waits for it).
func (m *Manager) Sandbox(ctx context.Context, agent string) (gateway.Sandbox, error) {
	b, spec, ok := m.agents.Lookup(agent)
	if b != nil && !b.h.Stale() {
		return b, nil
	}
	if !ok {
		return nil, fmt.Errorf("%w for agent %q", sandbox.ErrNotConfigured, agent)
	}
	if _, err := m.Sync(ctx, spec); err != nil {
		return nil, err
	}
	b, _, _ = m.agents.Lookup(agent)
	return b, nil
}

// Ensure makes the agent's pod exist, match spec and run: a running pod of
// this instance with the same spec hash is adopted; otherwise it is
// deleted and created again on the same workspace claim.
func (m *Manager) Ensure(ctx context.Context, spec sandbox.AgentSpec) (*Sandbox, error) {
	if spec.Agent == "" || spec.Image == "" {
		return nil, fmt.Errorf("sandbox spec for agent %q: agent and image are required", spec.Agent)
	}
	b, lock := m.agents.Register(spec)
	lock.Lock()
	defer lock.Unlock()
	pod, err := m.ensure(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("sandbox for agent %q: %w", spec.Agent, err)
	}
	b.h.Set(podRef{pod.Name, pod.UID}, spec)
	if err := m.moveSocket(b, spec); err != nil {
		b.h.MarkStale()
		return nil, fmt.Errorf("sandbox for agent %q: its socket: %w", spec.Agent, err)
	}
	return b, nil
}

// moveSocket moves the agent's socket into its new pod's volume, before
// the call that made the pod runs.
func (m *Manager) moveSocket(b *Sandbox, spec sandbox.AgentSpec) error {
	p, err := m.SocketPath(b)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.socks[spec.Agent] = spec.Socket(p)
	serve, specs := m.serve, slices.Clone(m.specs)
	m.mu.Unlock()
	if serve == nil {
		return nil // the daemon's first Sockets serves it
	}
	return serve(m.Sockets(specs))
}

// Sockets are the sockets of the agents of specs whose pod runs.
func (m *Manager) Sockets(specs []sandbox.AgentSpec) []sandbox.Socket {
	m.mu.Lock()
	defer m.mu.Unlock()
	var socks []sandbox.Socket
	for _, s := range specs {
		if k, ok := m.socks[s.Agent]; ok {
			socks = append(socks, k)
		}
	}
	return socks
}

// ServeSockets has set told of the sockets each time one moves.
func (m *Manager) ServeSockets(set func([]sandbox.Socket) error) {
	m.mu.Lock()
	m.serve = set
	m.mu.Unlock()
}

// Describe names the backend and this gateway's node.
func (m *Manager) Describe() []any {
	return []any{"backend", "kubernetes", "node", m.node}
}

// Up brings the pods up one after the other (each waits for its pod to
// run; the API server and the node pace them anyway); a pod that does not
// come up is logged, and its next call tries again.
func (m *Manager) Up(ctx context.Context, specs []sandbox.AgentSpec) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, s := range specs {
			if _, err := m.Sync(ctx, s); err != nil && ctx.Err() == nil {
				m.log.Error("sandbox pod not up", "agent", s.Agent, "err", err)
			}
		}
	}()
	return done
}

// Sync is Ensure for a configuration reload. A pod that must be recreated
// while calls run in it is recreated once they have finished — new calls
// wait for the new pod — or, at the latest, after the spec's drain bound,
// cutting what still runs: pending (sandbox.Calls.Resync).
func (m *Manager) Sync(ctx context.Context, spec sandbox.AgentSpec) (pending bool, err error) {
	b, _ := m.agents.Register(spec)
	// Not stale: Ensure adopts the pod it has, cutting nothing.
	keep := func() (bool, error) { return !b.h.Stale(), nil }
	// The newest spec: a reload may have come meanwhile.
	ensure := func(ctx context.Context) error {
		spec, ok := m.spec(b.agent)
		if !ok {
			return fmt.Errorf("agent %q: %w", b.agent, sandbox.ErrNotConfigured)
		}
		_, err := m.Ensure(ctx, spec)
		return err
	}
	return b.calls.Resync(ctx, keep, ensure, spec.DrainBound(hostexec.KillGrace), m.log, spec.Agent)
}

// Close releases the API client's idle connections; pods keep running
// (the next gateway adopts them).
func (m *Manager) Close() error {
	if rc, ok := m.cs.CoreV1().RESTClient().(*rest.RESTClient); ok && rc.Client != nil {
		rc.Client.CloseIdleConnections()
	}
	return nil
}

func (m *Manager) ensure(ctx context.Context, spec sandbox.AgentSpec) (*corev1.Pod, error) {
	want, err := m.podFor(spec)
	if err != nil {
		return nil, err
	}
	if err := m.ensurePolicy(ctx); err != nil {
		return nil, err
	}
	if err := m.ensureClaim(ctx, spec.Agent); err != nil {
		return nil, err
	}
	pods := m.cs.CoreV1().Pods(m.ns)
	cur, err := pods.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return nil, fmt.Errorf("pod %s: %w", want.Name, err)
	case !m.owns(cur.Labels):
		return nil, fmt.Errorf("a pod named %s exists and is not managed by this toolgate instance (%s); remove or rename it", want.Name, m.instance)
	}
	if cur != nil && cur.DeletionTimestamp == nil && cur.Annotations[AnnotSpec] == want.Annotations[AnnotSpec] &&
		cur.Status.Phase != corev1.PodFailed && cur.Status.Phase != corev1.PodSucceeded {
		return m.started(ctx, cur) // adopt
	}
	if cur != nil {
		if err := m.deletePod(ctx, cur); err != nil {
			return nil, err
		}
	}
	created, err := pods.Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating pod %s: %w", want.Name, err)
	}
	return m.started(ctx, created)
}

// started waits until the pod's sandbox container runs, then writes what
// the gateway puts into its volumes (launchers, managed settings).
func (m *Manager) started(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	wctx, cancel := context.WithTimeout(ctx, m.startWait)
	defer cancel()
	for {
		if running(pod) {
			spec, _ := m.spec(pod.Labels[LabelAgent])
			if err := m.writeLaunchers(pod.UID, spec); err != nil {
				return nil, err
			}
			return pod, nil
		}
		if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			return nil, fmt.Errorf("pod %s ended (%s) before it ran: %s", pod.Name, pod.Status.Phase, waitingReason(pod))
		}
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("pod %s did not start within %s: %s", pod.Name, m.startWait, waitingReason(pod))
		case <-time.After(100 * time.Millisecond):
		}
		next, err := m.cs.CoreV1().Pods(m.ns).Get(wctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
		}
		if next.UID != pod.UID {
			return nil, fmt.Errorf("pod %s was replaced while it started", pod.Name)
		}
		pod = next
	}
}

// running reports whether the pod's sandbox container is up.
func running(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == Container {
			return cs.State.Running != nil
		}
	}
	return false
}

// waitingReason says why a pod is not running yet, for errors.
func waitingReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return w.Reason + ": " + w.Message
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("exited %d (%s) %s", t.ExitCode, t.Reason, t.Message)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return c.Message
		}
	}
	return "phase " + string(pod.Status.Phase)
}

// deletePod deletes a pod at once and waits until it is gone, so its
// replacement can take the name.
func (m *Manager) deletePod(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	pods := m.cs.CoreV1().Pods(m.ns)
	err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting outdated pod %s: %w", pod.Name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, m.startWait)
	defer cancel()
	for {
		cur, err := pods.Get(wctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != pod.UID) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("waiting for pod %s to go: %w", pod.Name, err)
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("pod %s was not deleted within %s", pod.Name, m.startWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ensurePolicy creates the deny-all NetworkPolicy of this instance's pods
// before the first pod: no sandbox pod runs without it.
func (m *Manager) ensurePolicy(ctx context.Context) error {
	m.mu.Lock()
	done := m.policy
	m.mu.Unlock()
	if done {
		return nil
	}
	np := m.NetworkPolicy()
	_, err := m.cs.NetworkingV1().NetworkPolicies(m.ns).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("network policy %s: %w", np.Name, err)
	}
	m.mu.Lock()
	m.policy = true
	m.mu.Unlock()
	return nil
}

// ensureClaim creates the agent's workspace claim when it is missing. It
// outlives every pod: recreating a sandbox keeps its workspace.
func (m *Manager) ensureClaim(ctx context.Context, agent string) error {
	name := m.ClaimName(agent)
	claims := m.cs.CoreV1().PersistentVolumeClaims(m.ns)
	cur, err := claims.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		if !m.owns(cur.Labels) {
			return fmt.Errorf("a claim named %s exists and is not managed by this toolgate instance (%s)", name, m.instance)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("workspace claim %s: %w", name, err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns, Labels: m.labels(agent)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: m.size}},
		},
	}
	if m.class != "" {
		pvc.Spec.StorageClassName = &m.class
	}
	if _, err := claims.Create(ctx, pvc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating workspace claim %s: %w", name, err)
	}
	return nil
}

func (m *Manager) owns(labels map[string]string) bool {
	return labels[LabelManaged] == "true" && labels[LabelInstance] == m.instance
}

func (m *Manager) spec(agent string) (sandbox.AgentSpec, bool) { return m.agents.Spec(agent) }

// VolumeDir is where volume vol (an emptyDir) of pod uid is on this node.
func (m *Manager) VolumeDir(uid types.UID, vol string) string {
	return filepath.Join(m.kubeletDir, "pods", string(uid), "volumes", "kubernetes.io~empty-dir", vol)
}

// SocketPath is where the gateway listens for the agent's pod: the socket
// volume of its current pod through a link named after the pod's UID in
// SocketLinks. A recreated pod has a new UID, so a new path: a listener
// on the old one is not mistaken for the new pod's. Links whose pod
// volume is gone are removed.
func (m *Manager) SocketPath(sb *Sandbox) (string, error) {
	_, uid := sb.Pod()
	if err := os.MkdirAll(m.links, 0o755); err != nil {
		return "", err
	}
	link := filepath.Join(m.links, string(uid))
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(m.VolumeDir(uid, VolSocket), tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, link); err != nil {
		return "", err
	}
	if old, err := os.ReadDir(m.links); err == nil {
		for _, e := range old {
			p := filepath.Join(m.links, e.Name())
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) && e.Type()&os.ModeSymlink != 0 {
				_ = os.Remove(p)
			}
		}
	}
	return filepath.Join(link, proto.SocketName), nil
}

// writeLaunchers fills the gateway's volumes of a running pod: one
// launcher per plugin tool, and Claude Code's managed settings. A pod
// whose volumes are gone is not written to (fs.ErrNotExist): that would
// make its directories again under the kubelet's.
func (m *Manager) writeLaunchers(uid types.UID, spec sandbox.AgentSpec) error {
	if _, err := os.Stat(m.VolumeDir(uid, VolToolsBin)); err != nil {
		return fmt.Errorf("launchers: %w", err)
	}
	if err := sandbox.WriteLaunchers(m.VolumeDir(uid, VolToolsBin), spec.Tools, proto.LauncherPath); err != nil {
		return err
	}
	doc, err := hooks.ManagedSettings(nil, hooks.GateCommand{Command: proto.ClientPath})
	if err != nil {
		return err
	}
	p := filepath.Join(m.VolumeDir(uid, VolClaude), hooks.ManagedSettingsFile)
	if err := os.WriteFile(p+".tmp", doc, 0o644); err != nil {
		return fmt.Errorf("claude code managed settings: %w", err)
	}
	return os.Rename(p+".tmp", p)
}

// Status reports each configured agent's sandbox pod: its UID as the
// container, its phase in lower case as the state (running, pending …, as
// Docker's are).
func (m *Manager) Status(ctx context.Context) ([]sandbox.Status, error) {
	return m.agents.Status(func(agent string, b *Sandbox) (sandbox.Status, error) {
		st, err := m.podStatus(ctx, agent)
		st.State = strings.ToLower(st.State)
		st.Waiting, st.InFlight = b.h.Queue().Waiting(), b.calls.Running()
		return st, err
	})
}

// PodOf is the agent's pod and its phase as Kubernetes spells it (the
// Agent resource's status); no name when it has none.
func (m *Manager) PodOf(ctx context.Context, agent string) (pod, phase string, err error) {
	st, err := m.podStatus(ctx, agent)
	if err != nil {
		return "", "", err
	}
	if st.State == sandbox.StateMissing {
		return "", st.State, nil
	}
	return m.PodName(agent), st.State, nil
}

// podStatus reports the agent's sandbox pod: its UID as the container,
// its phase as the state.
func (m *Manager) podStatus(ctx context.Context, agent string) (sandbox.Status, error) {
	st := sandbox.Status{Agent: agent, State: sandbox.StateMissing}
	pod, err := m.cs.CoreV1().Pods(m.ns).Get(ctx, m.PodName(agent), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return st, err
	}
	if err == nil && m.owns(pod.Labels) {
		st.ContainerID, st.State = string(pod.UID), string(pod.Status.Phase)
		if len(pod.Spec.Containers) > 0 {
			st.Image = pod.Spec.Containers[0].Image
		}
		if pod.Status.StartTime != nil {
			st.StartedAt = pod.Status.StartTime.Time
		}
	}
	return st, nil
}

// Remove deletes the agent's pod (not its workspace claim).
func (m *Manager) Remove(ctx context.Context, agent string) error {
	pod, err := m.cs.CoreV1().Pods(m.ns).Get(ctx, m.PodName(agent), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !m.owns(pod.Labels) {
		return nil
	}
	if b, _, _ := m.agents.Lookup(agent); b != nil {
		b.h.MarkStale()
	}
	return m.deletePod(ctx, pod)
}
