package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/toolgate/toolgate/internal/testenv/timing"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/agentsock/sockettest"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/proto"
)

// pluginAgents starts two sandboxes, a (tools echo and hang) and b (no
// tools), each with its socket served by a real gateway.
func pluginAgents(t *testing.T, hang *sockettest.Func) (*sockettest.Env, [2]sandbox.AgentSpec, [2]*Sandbox) {
	needDocker(t)
	base := testPrefix + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	names := [2]string{base + "-a", base + "-b"}
	env := sockettest.New(t, sockettest.Allowlist{names[0]: {"echo", "hang"}, names[1]: {}}, hang)
	var specs [2]sandbox.AgentSpec
	var boxes [2]*Sandbox
	for i, name := range names {
		specs[i], boxes[i] = newAgent(t, func(s *sandbox.AgentSpec) {
			s.Agent = name
			s.Workspace = filepath.Join(testTmp, "agents", name, "workspace")
			if i == 0 {
				s.Tools = []string{"echo", "hang"}
			}
		})
		t.Cleanup(func() { _ = testMgr.Remove(context.Background(), name) })
		if err := env.Server.Serve(name, filepath.Join(specs[i].SocketDir(), proto.SocketName), 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	return env, specs, boxes
}

func TestPluginLaunchers(t *testing.T) {
	started := make(chan struct{}, 1)
	hang := &sockettest.Func{ToolName: "hang", Fn: func(ctx context.Context, _ *gateway.Call, _ *gateway.Streams) (*gateway.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	env, specs, boxes := pluginAgents(t, hang)
	a, b := boxes[0], boxes[1]
	ctx := context.Background()

	tests := []struct {
		name   string
		sb     *Sandbox
		argv   []string
		code   int
		stdout string
		stderr string
	}{
		{"echo on PATH", a, []string{"echo", "hi"}, 0, "hi\n", ""},
		{"literal argv", a, []string{"/tools/bin/echo", `a "q" 'b'`, "x\ny", "$(id)", ";", "`id`"}, 0, "a \"q\" 'b' x\ny $(id) ; `id`\n", ""},
		{"stdin", a, []string{"sh", "-c", "printf hello | /tools/bin/echo -"}, 0, "-\nhello", ""},
		{"launchers are the agent's tools", a, []string{"ls", "/tools/bin"}, 0, "echo\nhang\ntoolgate-client\n", ""},
		{"no launchers for b", b, []string{"ls", "/tools/bin"}, 0, "toolgate-client\n", ""},
		{"toolgate-client on PATH", a, []string{"sh", "-c", "toolgate-client call echo x"}, 0, "x\n", ""},
		{"denied through b's socket", b, []string{"/tools/toolgate-client", "call", "echo", "x"}, proto.LaunchExitDenied, "", "denied (tools.allowlist"},
		{"a's tool through b's socket", b, []string{"/tools/toolgate-client", "call", "hang"}, proto.LaunchExitDenied, "", "denied (tools.allowlist"},
		{"a's socket not in b", b, []string{"sh", "-c", "ls /run/toolgate/sock; test -e " + specs[0].SocketDir() + " || echo absent"}, 0, "gateway.sock\nabsent\n", ""},
		{"a's socket path unreachable from b", b, []string{"env", "TOOLGATE_SOCKET=" + filepath.Join(specs[0].SocketDir(), proto.SocketName), "/tools/toolgate-client", "call", "echo"}, proto.LaunchExitUnavailable, "", "gateway unavailable"},
		{"cwd outside the workspace", a, []string{"sh", "-c", "cd /tmp && /tools/bin/echo x"}, proto.LaunchExitUsage, "", "outside the workspace"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(ctx, tt.sb, gateway.ExecSpec{Argv: tt.argv, Cwd: proto.WorkspacePath, CallID: fmt.Sprintf("exec-%d", i)})
			if r.err != nil || r.out.ExitCode != tt.code || r.stdout != tt.stdout || !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("got %v %+v %q %q, want %d %q ~%q", r.err, r.out, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}

	// The launcher's call is parented to the exec that ran it, identified by
	// the socket, with the peer's host credentials (the sandbox user).
	var found bool
	for _, e := range env.Entries(t) {
		if e.Tool == "echo" && e.Phase == gateway.PhaseDecision && e.Agent == specs[0].Agent && e.Parent == "exec-0" {
			p, _ := e.Detail["peer"].(map[string]any)
			found = e.Type == gateway.KindTool && e.Decision == "allow" && p["uid"] == float64(1000)
		}
	}
	if !found {
		t.Fatalf("no tool entry parented to the exec: %+v", env.Entries(t))
	}

	t.Run("tools change without a new container", func(t *testing.T) {
		id := a.ContainerID()
		spec := specs[0]
		spec.Tools = []string{"echo", "git"}
		if err := testMgr.SetSpecs([]sandbox.AgentSpec{spec, specs[1]}); err != nil {
			t.Fatal(err)
		}
		sb, err := testMgr.Sandbox(ctx, spec.Agent)
		if err != nil {
			t.Fatal(err)
		}
		if r := mustRun(t, sb, "ls", "/tools/bin"); r.stdout != "echo\ngit\ntoolgate-client\n" || sb.(*Sandbox).ContainerID() != id {
			t.Fatalf("launchers %q, container %s → %s", r.stdout, id, sb.(*Sandbox).ContainerID())
		}
		_ = testMgr.SetSpecs([]sandbox.AgentSpec{specs[0], specs[1]})
	})

	t.Run("gateway restarting while a client waits", func(t *testing.T) {
		done := make(chan execResult, 1)
		go func() {
			done <- run(ctx, a, gateway.ExecSpec{Argv: []string{"/tools/bin/hang"}, Cwd: proto.WorkspacePath})
		}()
		<-started
		env.Server.Close()
		r := <-done
		if r.err != nil || r.out.ExitCode != proto.LaunchExitUnavailable || !strings.Contains(r.stderr, "gateway restarting") {
			t.Fatalf("got %v %+v %q", r.err, r.out, r.stderr)
		}
		// The restarted gateway's socket shows up in the mounted directory.
		srv := agentsock.New(env.GW, agentsock.Options{})
		defer srv.Close()
		if err := srv.Serve(specs[0].Agent, filepath.Join(specs[0].SocketDir(), proto.SocketName), 1000, 1000); err != nil {
			t.Fatal(err)
		}
		if r := mustRun(t, a, "/tools/bin/echo", "back"); r.stdout != "back\n" {
			t.Fatalf("after restart: %+v", r)
		}
	})
	if rep, err := audit.Verify(env.AuditDir); err != nil || !rep.OK() {
		t.Fatalf("audit chain: %v %+v", err, rep)
	}
}

// TestLauncherLatency prints p50/p99 of 500 sequential echo calls through
// the launcher from inside a sandbox, process start included, beside a
// shell-script launcher. Timing only: run with TOOLGATE_BENCH=1.
func TestLauncherLatency(t *testing.T) {
	if os.Getenv("TOOLGATE_BENCH") != "1" {
		t.Skip("set TOOLGATE_BENCH=1 to measure")
	}
	env, specs, boxes := pluginAgents(t, &sockettest.Func{ToolName: "hang"})
	_ = env
	ws := specs[0].Workspace
	timing.Build(t, ws)
	// Baseline: busybox has no Unix-socket client (its nc has no -U, wget
	// speaks TCP only), so the script launcher a shell-based client would be
	// is sh + the client: the interpreter's cost on top of the client's.
	if err := os.WriteFile(filepath.Join(ws, "sh-echo"), []byte("#!/bin/sh\nexec /tools/toolgate-client call echo \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := "500"
	fmt.Printf("%-40s %8s %8s\n", "launcher (500 sequential echo calls)", "p50 µs", "p99 µs")
	for _, c := range []struct{ name, path string }{
		{"/tools/bin/echo (static Go client)", "/tools/bin/echo"},
		{"sh script → toolgate-client call", "/workspace/sh-echo"},
		{"toolgate-client kill (client start only)", "/tools/toolgate-client kill --call none"},
		{"/bin/true (process start only)", "/bin/true"},
	} {
		r := mustRun(t, boxes[0], append([]string{"/workspace/timer", "-n", n}, append(strings.Fields(c.path), "hi")...)...)
		var l timing.Latency
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
			t.Fatalf("%s: %q %q", c.name, r.stdout, r.stderr)
		}
		fmt.Printf("%-40s %8d %8d\n", c.name, l.P50, l.P99)
	}
	if rep, err := audit.Verify(env.AuditDir); err != nil || !rep.OK() {
		t.Fatalf("audit chain: %v %+v", err, rep)
	}
}
