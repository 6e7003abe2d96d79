package sandboxtest_test

import (
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/sandboxtest"
)

// conformance is a new backend's test: its backend, the spec of a fresh
// agent on its test image, and a way to take a sandbox away underneath it
// as an operator or a failing node would. The suite does the rest: exec
// and its exit codes, cancel and timeout killing the whole tree, files
// both ways, a sandbox lost between calls and under one, recreate.
// Docker's and Kubernetes' are their packages' conformance_test.go.
func conformance(t *testing.T, b sandbox.Backend, lose func(agent string) error) {
	sandboxtest.Run(t, sandboxtest.Harness{
		Backend: b,
		Spec: func(t testing.TB, name string) sandbox.AgentSpec {
			return sandbox.AgentSpec{Agent: "conformance-" + name, Image: "toolgate-test:latest",
				Workspace: filepath.Join(t.TempDir(), "workspace"), User: "1000:1000", Memory: 256 << 20, CPUs: 1, Pids: 128}
		},
		Lose: func(t testing.TB, agent string) {
			if err := lose(agent); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// A backend proves it keeps the contract (sandbox.Backend) by running the
// suite against the real thing it drives.
func ExampleRun() {
	_ = conformance // called from the backend's TestConformance
}
