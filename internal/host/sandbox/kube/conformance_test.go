package kube

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/sandboxtest"
)

// TestConformance runs the backend contract's suite against the real
// cluster.
func TestConformance(t *testing.T) {
	c := needCluster(t)
	m := c.manager(t, "conf")
	sandboxtest.Run(t, sandboxtest.Harness{
		Backend: m,
		Spec: func(t testing.TB, name string) sandbox.AgentSpec {
			spec := sandbox.AgentSpec{Agent: "c-" + name, Image: c.img, User: "1000:1000"}
			c.volume(t, m, spec.Agent)
			return spec
		},
		Lose: func(t testing.TB, agent string) {
			ctx := context.Background()
			pods := c.cs.CoreV1().Pods(c.ns)
			pod, err := pods.Get(ctx, m.PodName(agent), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			zero := int64(0)
			if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
			// Gone from the API at once, its processes a moment later:
			// once the kubelet has removed its volumes.
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				_, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
				if _, serr := os.Stat(m.VolumeDir(pod.UID, VolExec)); apierrors.IsNotFound(err) && errors.Is(serr, fs.ErrNotExist) {
					return
				}
			}
			t.Fatalf("pod of %s not gone", agent)
		},
		Paths: map[string]func(gateway.Sandbox) gateway.Sandbox{
			"executor":  func(sb gateway.Sandbox) gateway.Sandbox { return sb },
			"pods-exec": func(sb gateway.Sandbox) gateway.Sandbox { return apiOnly{sb.(*Sandbox)} },
		},
	})
}

// apiOnly is a sandbox whose calls go through pods/exec, never the warm
// executor.
type apiOnly struct{ *Sandbox }

func (a apiOnly) Exec(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
	return a.ExecThroughAPI(ctx, spec)
}
