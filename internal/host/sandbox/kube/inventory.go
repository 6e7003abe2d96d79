package kube

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/internal/host/sandbox"
)

// Find lists every toolgate sandbox pod in the namespace, of every
// gateway instance. A pod has no home on this host: another instance's
// is another gateway's, which only it can tell is gone.
func (m *Manager) Find(ctx context.Context) ([]sandbox.Found, error) {
	pods, err := m.cs.CoreV1().Pods(m.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	out := make([]sandbox.Found, 0, len(pods.Items))
	for _, p := range pods.Items {
		f := sandbox.Found{Agent: p.Labels[LabelAgent], Instance: p.Labels[LabelInstance], ID: string(p.UID), Name: p.Name,
			State: strings.ToLower(string(p.Status.Phase)), Created: p.CreationTimestamp.Time}
		if len(p.Spec.Containers) > 0 {
			f.Image = p.Spec.Containers[0].Image
		}
		if p.Spec.RuntimeClassName != nil {
			f.Runtime = *p.Spec.RuntimeClassName
		}
		out = append(out, f)
	}
	sandbox.SortFound(out)
	return out, nil
}

// Stop deletes the agent's pod: a pod cannot be stopped and started
// again. Its workspace claim stays, and the next call makes the pod anew
// on it.
func (m *Manager) Stop(ctx context.Context, agent string) error { return m.Remove(ctx, agent) }

// RemoveFound deletes a pod Find listed: only a toolgate one, this
// instance's through Remove, so its handle knows. Claims stay.
func (m *Manager) RemoveFound(ctx context.Context, f sandbox.Found) error {
	if f.Instance == m.instance {
		return m.Remove(ctx, f.Agent)
	}
	pod, err := m.cs.CoreV1().Pods(m.ns).Get(ctx, f.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && string(pod.UID) != f.ID) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Labels[LabelManaged] != "true" {
		return fmt.Errorf("pod %s is not toolgate's", f.Name)
	}
	return m.deletePod(ctx, pod)
}
