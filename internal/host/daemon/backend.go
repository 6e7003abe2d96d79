package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/host/sandbox/kube"
	"github.com/toolgate/toolgate/internal/proto"
)

// backend is a sandbox backend as the daemon drives it
// (gateway.sandbox.backend): the gateway's interface plus what a reload
// and the status need, and where each agent's socket is.
type backend interface {
	gateway.Sandboxes
	SetSpecs([]sandbox.AgentSpec) error
	// Sync brings one sandbox in line after a reload; pending: it is
	// recreated once its calls finish.
	Sync(ctx context.Context, spec sandbox.AgentSpec) (pending bool, err error)
	Remove(ctx context.Context, agent string) error
	Status(ctx context.Context) ([]sandbox.Status, error)
	Close() error
	// Up brings the sandboxes of specs up in the background (a start);
	// done is closed once each is up or failed.
	Up(ctx context.Context, specs []sandbox.AgentSpec) (done <-chan struct{})
	// prepare does what must precede the sandboxes of specs (an image to build).
	prepare(ctx context.Context, specs []sandbox.AgentSpec) error
	// sockets are the agent sockets for specs, as far as known now.
	sockets(specs []sandbox.AgentSpec) []agentsock.Socket
	// describe names the backend in the start's log line.
	describe() []any
}

// dockerBackend: containers on this host, sockets in host directories.
type dockerBackend struct{ *docker.Manager }

func (b dockerBackend) prepare(ctx context.Context, specs []sandbox.AgentSpec) error {
	return b.BuildDefaultImageFor(ctx, specs)
}

func (dockerBackend) sockets(specs []sandbox.AgentSpec) []agentsock.Socket {
	var socks []agentsock.Socket
	for _, s := range specs {
		socks = append(socks, socketOf(s, filepath.Join(s.SocketDir(), proto.SocketName)))
	}
	return socks
}

func (b dockerBackend) describe() []any {
	return []any{"backend", config.BackendDocker, "docker_api", b.APIVersion()}
}

// kubeBackend: pods on this gateway's node. An agent's socket is in its
// current pod's volume, so it is known only once the pod runs and moves
// when the pod is recreated (kube.Options.OnPod tells).
type kubeBackend struct {
	*kube.Manager
	node string
	log  *slog.Logger

	mu    sync.Mutex
	paths map[string]agentsock.Socket // agent → socket of its current pod
	serve func([]agentsock.Socket) error
	specs []sandbox.AgentSpec // the last SetSpecs'
}

// newKube connects the kubernetes backend of cfg.
func newKube(ctx context.Context, k *config.Kubernetes, log *slog.Logger) (*kubeBackend, *rest.Config, error) {
	rc, err := restConfig(k)
	if err != nil {
		return nil, nil, err
	}
	b := &kubeBackend{node: k.Node, log: log, paths: map[string]agentsock.Socket{}}
	mgr, err := kube.New(ctx, kube.Options{Config: rc, Namespace: k.Namespace, Instance: k.Instance, Node: k.Node,
		KubeletDir: k.KubeletDir, SocketLinks: k.SocketLinks, StorageClass: k.StorageClass, WorkspaceSize: k.WorkspaceSize,
		PullPolicy: corev1.PullPolicy(k.PullPolicy), StartTimeout: k.StartTimeout, OnPod: b.onPod, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	b.Manager = mgr
	return b, rc, nil
}

// restConfig reaches the API server: the kubeconfig when set, else the
// pod's service account.
func restConfig(k *config.Kubernetes) (*rest.Config, error) {
	if k.Kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("gateway.sandbox.kubernetes: no kubeconfig set and not in a pod: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: k.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: k.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("gateway.sandbox.kubernetes.kubeconfig: %w", err)
	}
	return rc, nil
}

func (b *kubeBackend) prepare(context.Context, []sandbox.AgentSpec) error { return nil }

// Up brings the pods up one after the other (each waits for its pod to
// run; the API server and the node pace them anyway); a pod that does not
// come up is logged, and its next call tries again.
func (b *kubeBackend) Up(ctx context.Context, specs []sandbox.AgentSpec) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, s := range specs {
			if _, err := b.Sync(ctx, s); err != nil && ctx.Err() == nil {
				b.log.Error("sandbox pod not up", "agent", s.Agent, "err", err)
			}
		}
	}()
	return done
}

func (b *kubeBackend) SetSpecs(specs []sandbox.AgentSpec) error {
	b.mu.Lock()
	b.specs = specs
	b.mu.Unlock()
	return b.Manager.SetSpecs(specs)
}

func (b *kubeBackend) sockets(specs []sandbox.AgentSpec) []agentsock.Socket {
	b.mu.Lock()
	defer b.mu.Unlock()
	var socks []agentsock.Socket
	for _, s := range specs {
		if k, ok := b.paths[s.Agent]; ok {
			socks = append(socks, k)
		}
	}
	return socks
}

// onPod moves the agent's socket into its new pod's volume, before the
// call that (re)created the pod runs.
func (b *kubeBackend) onPod(spec sandbox.AgentSpec, path string) error {
	b.mu.Lock()
	b.paths[spec.Agent] = socketOf(spec, path)
	serve, specs := b.serve, slices.Clone(b.specs)
	b.mu.Unlock()
	if serve == nil {
		return nil // the daemon's first SetAgents serves it
	}
	return serve(b.sockets(specs))
}

// serveWith makes onPod re-serve the sockets through set.
func (b *kubeBackend) serveWith(set func([]agentsock.Socket) error) {
	b.mu.Lock()
	b.serve = set
	b.mu.Unlock()
}

func (b *kubeBackend) describe() []any {
	return []any{"backend", config.BackendKubernetes, "node", b.node}
}

// podOf is the agent's pod and its phase, for the Agent controller.
func (b *kubeBackend) podOf(ctx context.Context, agent string) (string, string, error) {
	st, err := b.PodStatus(ctx, agent)
	if err != nil {
		return "", "", err
	}
	if st.State == sandbox.StateMissing {
		return "", st.State, nil
	}
	return b.PodName(agent), st.State, nil
}

func socketOf(s sandbox.AgentSpec, path string) agentsock.Socket {
	uid, gid, _ := sandbox.ParseUser(s.UserOrDefault()) // validated with the config
	return agentsock.Socket{Agent: s.Agent, Path: path, UID: uid, GID: gid}
}
