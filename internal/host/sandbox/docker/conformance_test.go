package docker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/sandboxtest"
)

// TestConformance runs the backend contract's suite against real Docker.
func TestConformance(t *testing.T) {
	needDocker(t)
	m, err := New(context.Background(), Options{Instance: testInstance()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	sandboxtest.Run(t, sandboxtest.Harness{
		Backend: m,
		Spec: func(t testing.TB, name string) sandbox.AgentSpec {
			agent := testPrefix + "c-" + name
			dir := filepath.Join(testTmp, "agents", agent)
			if err := os.RemoveAll(dir); err != nil { // a fresh workspace, also under -count
				t.Fatal(err)
			}
			return sandbox.AgentSpec{Agent: agent, Image: testImage, Workspace: filepath.Join(dir, "workspace"),
				User: "1000:1000", Memory: 256 << 20, CPUs: 1, Pids: 128, ClientBinary: testClient}
		},
		Lose: func(t testing.TB, agent string) {
			if _, err := m.Client().ContainerRemove(context.Background(), m.ContainerName(agent), client.ContainerRemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
		},
		Paths: map[string]func(gateway.Sandbox) gateway.Sandbox{
			"executor": func(sb gateway.Sandbox) gateway.Sandbox { return sb },
			"engine":   func(sb gateway.Sandbox) gateway.Sandbox { return engineOnly{sb.(*Sandbox)} },
		},
	})
}

// engineOnly is a sandbox whose calls go through Engine execs, never the
// warm executor.
type engineOnly struct{ *Sandbox }

func (e engineOnly) Exec(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
	return e.execEngine(ctx, spec, callIDOf(spec))
}
