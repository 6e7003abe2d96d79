package systemtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/lifecycle"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// sandboxRows is `toolgate sandbox ls --json` on e's home, by container
// name.
func sandboxRows(t *testing.T, e *Env) map[string]api.Sandbox {
	t.Helper()
	out, code := e.CLI("", "sandbox", "ls", "--json")
	if code != 0 {
		t.Fatalf("sandbox ls: %d %s", code, out)
	}
	var rows []api.Sandbox
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	byName := map[string]api.Sandbox{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	return byName
}

// rowOf is the row of agent in home (instance), or ok false.
func rowOf(rows map[string]api.Sandbox, instance, agent string) (api.Sandbox, bool) {
	for _, r := range rows {
		if r.Instance == instance && r.Agent == agent {
			return r, true
		}
	}
	return api.Sandbox{}, false
}

// TestSandboxLifecycle: toolgate sandbox ls, stop, rm and prune against
// running, stopped and foreign sandboxes, through the gateway serving the
// home (each action on its record) and with none (under the home's lock);
// serve --rm leaves none of the home's running. Workspaces stay unless
// asked for by name.
func TestSandboxLifecycle(t *testing.T) {
	other := NewWith(t, Extra{}, "life-other")
	if err := other.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	other.Daemon = nil // its sandbox keeps running, as a stopped gateway's does
	otherInstance := instanceOf(t, other)

	e := New(t, "life-a", "life-b")
	a, b := e.Agents[0], e.Agents[1]
	inst := instanceOf(t, e)
	if _, err := e.Call(a, "write", map[string]any{"path": "data.bin", "content": strings.Repeat("x", 100_000)}); err != nil {
		t.Fatal(err)
	}

	rows := sandboxRows(t, e)
	ra, ok := rowOf(rows, inst, a)
	if !ok || ra.Place != sandbox.PlaceHere || ra.State != "running" || ra.WorkspaceBytes < 100_000 || ra.Backend != "docker" {
		t.Fatalf("agent a: %+v (all: %+v)", ra, rows)
	}
	if ro, ok := rowOf(rows, otherInstance, other.Agents[0]); !ok || ro.Place != sandbox.PlaceOtherHome || ro.Home != other.Home {
		t.Fatalf("the other home's sandbox: %+v", ro)
	}

	t.Run("bad input", func(t *testing.T) {
		for _, args := range [][]string{
			{"sandbox", "stop", "no-such-agent"},
			{"sandbox", "rm", other.Agents[0]}, // another home's agent is not this home's to name
			{"sandbox", "rm"},
			{"sandbox", "rm", a, b},
			{"sandbox", "prune", a},
		} {
			if out, code := e.CLI("", args...); code == 0 {
				t.Errorf("%q: exit 0: %s", args, out)
			}
		}
		if out, _ := e.CLI("", "sandbox", "stop", "no-such-agent"); !strings.Contains(out, `no such agent "no-such-agent"`) {
			t.Errorf("unknown agent: %s", out)
		}
	})

	t.Run("stop refuses calls in flight, then cuts them with --force", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := e.Call(a, "exec", map[string]any{"command": "sleep 30"})
			done <- err
		}()
		for deadline := time.Now().Add(10 * time.Second); sandboxRows(t, e)[ra.Name].InFlight == 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the call never showed in flight")
			}
		}
		if out, code := e.CLI("", "sandbox", "stop", a); code == 0 || !strings.Contains(out, "calls in flight: 1") {
			t.Fatalf("stop under a call: %d %s", code, out)
		}
		out, code := e.CLI("", "sandbox", "stop", "--force", a)
		if code != 0 || !strings.Contains(out, "stopped "+ra.Name) || !strings.Contains(out, "on the audit record") {
			t.Fatalf("stop --force: %d %s", code, out)
		}
		select {
		case <-done: // cut, whatever it says
		case <-time.After(20 * time.Second):
			t.Fatal("the call in flight outlived its sandbox's stop")
		}
		if r := sandboxRows(t, e)[ra.Name]; r.State != "exited" {
			t.Fatalf("after stop: %+v", r)
		}
		// The next call starts it again, on the same workspace.
		res, err := e.Call(a, "exec", map[string]any{"command": "wc -c < data.bin"})
		if err != nil || !strings.Contains(Out(res, "stdout").(string), "100000") {
			t.Fatalf("after stop: %v %+v", err, res)
		}
		stops := e.Entries(audit.Filter{Agent: a, Tool: lifecycle.ToolStop})
		if len(stops) != 1 || stops[0].Decision != gateway.VerdictActed || stops[0].Type != gateway.KindAdmin ||
			!strings.HasPrefix(stops[0].Detail["by"].(string), "admin") || stops[0].Detail["force"] != true {
			t.Fatalf("stop entries: %+v", stops)
		}
	})

	t.Run("rm removes the sandbox, not the workspace", func(t *testing.T) {
		out, code := e.CLI("", "sandbox", "rm", b)
		if code != 0 || !strings.Contains(out, "removed") {
			t.Fatalf("rm: %d %s", code, out)
		}
		if _, ok := rowOf(sandboxRows(t, e), inst, b); ok {
			t.Fatal("b's sandbox is still listed")
		}
		if _, err := os.Stat(e.Config().Agents[b].Workspace); err != nil {
			t.Fatalf("rm took the workspace: %v", err)
		}
		if out, code := e.CLI("", "sandbox", "rm", b); code != 0 || !strings.Contains(out, "has no sandbox") {
			t.Fatalf("rm of none: %d %s", code, out)
		}
	})

	// b's next call makes its sandbox anew; then no gateway serves the
	// home, and b leaves its configuration meanwhile. The commands now act
	// under the home's lock and say that nothing is recorded.
	if _, err := e.Call(b, "exec", map[string]any{"command": "true"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Daemon = nil
	e.Agents = []string{a}
	e.WriteConfig("")
	if err := os.Remove(other.ConfigPath); err != nil { // the other home is gone
		t.Fatal(err)
	}

	// Other tests' finished homes may have left sandboxes behind on the
	// same Engine: prune lists them too, so the checks name this test's.
	rows = sandboxRows(t, e)
	ro, ok := rowOf(rows, otherInstance, other.Agents[0])
	if !ok || ro.Place != sandbox.PlaceLeftBehind {
		t.Fatalf("the gone home's sandbox: %+v", ro)
	}
	rb, ok := rowOf(rows, inst, b)
	if !ok || rb.Place != sandbox.PlaceUnused {
		t.Fatalf("b, no longer configured: %+v", rb)
	}
	bws := filepath.Join(e.Home, "agents", b, "workspace")
	out, code := e.CLI("", "sandbox", "prune", "--dry-run", "--workspaces")
	if code != 0 || !strings.Contains(out, "would remove "+ro.Name+" (agent "+ro.Agent+", left behind)") ||
		!strings.Contains(out, "would remove "+rb.Name+" (agent "+b+", not configured)") ||
		strings.Count(out, "would delete workspace ") != 1 || !strings.Contains(out, "would delete workspace "+bws) ||
		strings.Contains(out, ra.Name) || strings.Contains(out, ", configured)") || strings.Contains(out, ", other home)") {
		t.Fatalf("prune --dry-run: %d %s", code, out)
	}
	for _, r := range []api.Sandbox{ro, rb} {
		if _, ok := sandboxRows(t, e)[r.Name]; !ok {
			t.Fatalf("a dry run removed %s", r.Name)
		}
	}
	out, code = e.CLI("", "sandbox", "prune")
	if code != 0 || !strings.Contains(out, "not on its audit record") {
		t.Fatalf("prune: %d %s", code, out)
	}
	rows = sandboxRows(t, e)
	for _, gone := range [][2]string{{otherInstance, other.Agents[0]}, {inst, b}} {
		if r, ok := rowOf(rows, gone[0], gone[1]); ok {
			t.Fatalf("still there after prune: %+v", r)
		}
	}
	if r, ok := rowOf(rows, inst, a); !ok || r.Place != sandbox.PlaceHere {
		t.Fatalf("prune took a configured agent's sandbox: %+v", rows)
	}
	for _, ws := range []string{filepath.Join(e.Home, "agents", a, "workspace"), filepath.Join(e.Home, "agents", b, "workspace")} {
		if _, err := os.Stat(ws); err != nil {
			t.Fatalf("prune without --workspaces took %s: %v", ws, err)
		}
	}

	t.Run("serve --rm", func(t *testing.T) {
		cmd, c := e.ServeProcess("--rm")
		if _, err := c.Call(context.Background(), a, "exec", map[string]any{"command": "true"}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("serve --rm: %v", err)
		}
		if r, ok := rowOf(sandboxRows(t, e), inst, a); ok {
			t.Fatalf("serve --rm left %+v", r)
		}
		if _, err := os.Stat(filepath.Join(e.Home, "agents", a, "workspace", "data.bin")); err != nil {
			t.Fatalf("serve --rm took the workspace: %v", err)
		}
		var removed int
		if err := audit.Query(filepath.Join(e.Home, "logs"), audit.Filter{Agent: a, Tool: lifecycle.ToolRemove}, func(en *gateway.Entry) error {
			if en.Detail["why"] == "serve --rm" {
				removed++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if removed != 1 {
			t.Fatalf("%d serve --rm removals on record", removed)
		}
	})

	t.Run("rm --workspace", func(t *testing.T) {
		ws := filepath.Join(e.Home, "agents", a, "workspace")
		out, code := e.CLI("", "sandbox", "rm", "--workspace", a)
		if code != 0 || !strings.Contains(out, "deleted workspace "+ws) {
			t.Fatalf("rm --workspace: %d %s", code, out)
		}
		if _, err := os.Stat(ws); !os.IsNotExist(err) {
			t.Fatalf("the workspace is still there: %v", err)
		}
	})
}

// instanceOf is the instance id of e's home, as its sandboxes are labelled.
func instanceOf(t *testing.T, e *Env) string {
	t.Helper()
	rows := sandboxRows(t, e)
	for _, r := range rows {
		if r.Place == sandbox.PlaceHere {
			return r.Instance
		}
	}
	t.Fatalf("no sandbox of home %s: %+v", e.Home, rows)
	return ""
}
