package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/timing"
)

// TestLauncherLatency prints, for 500 sequential calls from inside a
// sandbox on the daemon's production configuration, p50/p99 per call
// including the process start: the builtin echo plugin through the lean
// launcher (/tools/bin/echo), through the full client and through a
// shell-script launcher; Claude Code's gate and tap as the CLI runs them
// (sh -c, hook input on stdin); and a bare process start for scale. Timing is no assertion; run it to measure:
//
//	TOOLGATE_BENCH=1 go test ./internal/daemon -run LauncherLatency -v
func TestLauncherLatency(t *testing.T) {
	if os.Getenv("TOOLGATE_BENCH") != "1" {
		t.Skip("set TOOLGATE_BENCH=1 to measure")
	}
	e := newEnv(t, "lat")
	a := e.agents[0]
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf("gateway:\n  clientBinary: %s\nplugins:\n  echo: {kind: builtin, builtin: toolgate-echo}\nagents:\n  %s:\n    tools: [echo]\n", clientBin, a)
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(e.home, "agents", a, "workspace")
	timing.Build(t, ws)
	if err := os.WriteFile(filepath.Join(ws, "sh-echo"), []byte("#!/bin/sh\nexec /tools/toolgate-client call echo \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, sample := range map[string]string{"pre.json": "hook-input-PreToolUse-Bash.json", "post.json": "hook-input-PostToolUse-Bash.json"} {
		b, err := os.ReadFile(filepath.Join("..", "hooks", "testdata", "claude-code-samples", sample))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("%-44s %8s %8s\n", "500 sequential calls, inside the sandbox", "p50 µs", "p99 µs")
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"/tools/bin/echo (toolgate-launch)", []string{"/tools/bin/echo", "hi"}},
		{"toolgate-client call echo", []string{"/tools/toolgate-client", "call", "echo", "hi"}},
		{"sh script → toolgate-client call", []string{"/workspace/sh-echo", "hi"}},
		{"Claude Code gate (sh -c, hook pre-tool-use)", []string{"-in", "/workspace/pre.json", "/bin/sh", "-c", "/tools/toolgate-client hook pre-tool-use"}},
		{"Claude Code tap (sh -c, hook post-tool-use)", []string{"-in", "/workspace/post.json", "/bin/sh", "-c", "/tools/toolgate-client hook post-tool-use"}},
		{"/bin/true (process start only)", []string{"/bin/true"}},
	} {
		res, err := e.call(a, "exec", map[string]any{"argv": append([]string{"/workspace/timer", "-n", "500"}, c.argv...), "timeout": "5m"})
		var l timing.Latency
		if err != nil || json.Unmarshal([]byte(fmt.Sprint(out(res, "stdout"))), &l) != nil {
			t.Fatalf("%s: %v %+v", c.name, err, res)
		}
		fmt.Printf("%-44s %8d %8d\n", c.name, l.P50, l.P99)
	}
	e.verify()
}
