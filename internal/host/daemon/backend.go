package daemon

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/kube"
)

// newKube connects the kubernetes backend of cfg.
func newKube(ctx context.Context, k *config.Kubernetes, log *slog.Logger) (*kube.Manager, *rest.Config, error) {
	rc, err := restConfig(k)
	if err != nil {
		return nil, nil, err
	}
	mgr, err := kube.New(ctx, kube.Options{Config: rc, Namespace: k.Namespace, Instance: k.Instance, Node: k.Node,
		KubeletDir: k.KubeletDir, SocketLinks: k.SocketLinks, StorageClass: k.StorageClass, WorkspaceSize: k.WorkspaceSize,
		PullPolicy: corev1.PullPolicy(k.PullPolicy), StartTimeout: k.StartTimeout, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return mgr, rc, nil
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

// prepare does what must precede the sandboxes of specs, when the backend
// has anything to do (sandbox.Preparer).
func prepare(ctx context.Context, b sandbox.Backend, specs []sandbox.AgentSpec) error {
	if p, ok := b.(sandbox.Preparer); ok {
		return p.Prepare(ctx, specs)
	}
	return nil
}

// serveSockets serves the backend's agent sockets on sock, and again each
// time one moves (sandbox.SocketMover).
func serveSockets(b sandbox.Backend, sock *agentsock.Server) {
	if m, ok := b.(sandbox.SocketMover); ok {
		m.ServeSockets(func(s []sandbox.Socket) error { return sock.SetAgents(agentSockets(s)) })
	}
}

// agentSockets are the backend's sockets as the agent socket server takes them.
func agentSockets(socks []sandbox.Socket) []agentsock.Socket {
	out := make([]agentsock.Socket, 0, len(socks))
	for _, s := range socks {
		out = append(out, agentsock.Socket(s))
	}
	return out
}
