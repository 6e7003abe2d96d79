package hookserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/hookcall"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/timing"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// sandboxEnv is a real Docker sandbox whose agent socket serves the hook
// routes of a gateway running in this test.
type sandboxEnv struct {
	*env
	box       gateway.Sandbox
	workspace string // on the host
}

func newSandboxEnv(t testing.TB) *sandboxEnv {
	t.Helper()
	testenv.NeedDocker(t)
	_, clientBin := testenv.Binaries(t)
	ctx := context.Background()
	root := t.TempDir()
	spec := sandbox.AgentSpec{Agent: testenv.Prefix() + "hooks", Image: proto.DefaultImage,
		Workspace: filepath.Join(root, "agent", "workspace"), ClientBinary: clientBin}
	mgr, err := docker.New(ctx, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	if _, err := mgr.BuildDefaultImage(ctx, spec.Image, false); err != nil {
		t.Fatal(err)
	}
	box, err := mgr.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	uid, gid, _ := sandbox.ParseUser(spec.UserOrDefault())
	e := newEnv(t, spec.Agent, filepath.Join(spec.SocketDir(), proto.SocketName), spec.Workspace, uid, gid)
	se := &sandboxEnv{env: e, box: box, workspace: spec.Workspace}
	if err := os.MkdirAll(filepath.Join(spec.Workspace, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(spec.Workspace, "proj"), uid, gid)
	return se
}

// hook runs a hook command exactly as Claude Code does: /bin/sh -c with the
// command line, cwd the project directory, the input JSON on stdin.
func (s *sandboxEnv) hook(t testing.TB, cmdline string, input []byte) (int, string, string) {
	t.Helper()
	var o, e bytes.Buffer
	out, err := s.box.Exec(context.Background(), &gateway.ExecSpec{
		Argv: []string{"/bin/sh", "-c", cmdline}, Cwd: "/workspace/proj",
		Stdin: bytes.NewReader(input), Stdout: &o, Stderr: &e, Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.ExitCode, o.String(), e.String()
}

// restart replaces the agent socket server, as a gateway restart does.
func (s *sandboxEnv) restart(t testing.TB, up bool) {
	t.Helper()
	s.agents.Close()
	if !up {
		return
	}
	hs, err := New(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	s.hs = hs
	s.agents = agentsock.New(s.gw, agentsock.Options{Logger: quiet})
	hs.Mount(s.agents)
	if err := s.agents.Serve(s.agent, s.sock, s.uid, s.gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.agents.Close() })
}

const (
	gateCmd = "/tools/toolgate-client hook pre-tool-use"
	tapCmd  = "/tools/toolgate-client hook post-tool-use"
)

func TestHooksInSandbox(t *testing.T) {
	s := newSandboxEnv(t)
	verdict := func(stdout string) string {
		var out struct {
			H struct {
				D string `json:"permissionDecision"`
				R string `json:"permissionDecisionReason"`
			} `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("stdout %q: %v", stdout, err)
		}
		return out.H.D + ": " + out.H.R
	}
	gateCases := []struct {
		name, want string
		input      []byte
	}{
		{"allow", "allow: ", sample(t, "hook-input-PreToolUse-Bash.json")},
		{"deny by rule", "deny: no recursive removal", preInput("Bash", "toolu_e2e_rm", map[string]any{"command": "rm -rf /workspace"})},
		{"deny a relative path", "deny: shadow is off limits", preInput("Read", "toolu_e2e_r", map[string]any{"file_path": "../../etc/shadow"})},
		{"bad input fails closed", "deny: toolgate gate failed closed: hook input lacks a required field", []byte(`{"hook_event_name":"PreToolUse"}`)},
	}
	for _, c := range gateCases {
		code, stdout, stderr := s.hook(t, gateCmd, c.input)
		if code != 0 || !strings.HasPrefix(verdict(stdout), c.want) {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want %q", c.name, code, stdout, stderr, c.want)
		}
	}

	post := sample(t, "hook-input-PostToolUse-Bash.json")
	failure := sample(t, "hook-input-PostToolUseFailure-Bash.json")
	if code, stdout, _ := s.hook(t, tapCmd, post); code != 0 || stdout != "" {
		t.Fatalf("tap: exit %d, stdout %q", code, stdout)
	}

	// Gateway down: the gate denies, the tap spools in the workspace.
	s.restart(t, false)
	code, stdout, _ := s.hook(t, gateCmd, sample(t, "hook-input-PreToolUse-Bash.json"))
	if code != 0 || !strings.HasPrefix(verdict(stdout), "deny: toolgate gate failed closed: gateway unavailable") {
		t.Fatalf("gateway down: exit %d, stdout %q", code, stdout)
	}
	if code, stdout, _ := s.hook(t, tapCmd, failure); code != 0 || stdout != "" {
		t.Fatalf("tap while down: exit %d, stdout %q", code, stdout)
	}
	spooled, _ := filepath.Glob(filepath.Join(s.workspace, ".toolgate", "spool", "ev-*.json"))
	if len(spooled) != 1 {
		t.Fatalf("spooled %v, want one event", spooled)
	}

	// Back up: the next tap delivers itself and drains the spool; the same
	// event three times is recorded once.
	s.restart(t, true)
	for range 3 {
		if code, _, stderr := s.hook(t, tapCmd, post); code != 0 {
			t.Fatalf("tap after restart: exit %d %s", code, stderr)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(s.workspace, ".toolgate", "spool", "ev-*.json")); len(left) != 0 {
		t.Fatalf("spool not drained: %v", left)
	}
	taps := s.entries(t, audit.Filter{Type: "hook", Decision: hookcall.DecisionReported})
	if len(taps) != 2 {
		t.Fatalf("%d tap entries, want 2 (PostToolUse once, PostToolUseFailure once): %+v", len(taps), taps)
	}
}

// BenchmarkHooksInSandbox measures, inside the sandbox, process start to
// exit (the answer is printed just before) of the gate, the tap, and a
// /bin/sh hook that only reads stdin and prints a constant allow: the floor
// for any shell-script hook. busybox nc and wget cannot reach a Unix socket,
// so a shell hook that asks the gateway has no busybox baseline.
//
//	go test ./internal/host/door/hookserver -run '^$' -bench HooksInSandbox -benchtime 500x
func BenchmarkHooksInSandbox(b *testing.B) {
	s := newSandboxEnv(b)
	timing.Build(b, s.workspace)
	for name, data := range map[string][]byte{
		"pre.json":  sample(b, "hook-input-PreToolUse-Bash.json"),
		"post.json": sample(b, "hook-input-PostToolUse-Bash.json"),
	} {
		if err := os.WriteFile(filepath.Join(s.workspace, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct{ name, in, cmd string }{
		{"gate", "pre.json", gateCmd},
		{"tap", "post.json", tapCmd},
		{"sh-constant-allow", "pre.json", `cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := max(b.N, 20) // percentiles of fewer runs mean little
			cmd := fmt.Sprintf("/workspace/timer -n %d -in /workspace/%s /bin/sh -c %q", n, c.in, c.cmd)
			code, stdout, stderr := s.hook(b, cmd, nil)
			var r timing.Latency
			if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil {
				b.Fatalf("driver: exit %d %s %s", code, stdout, stderr)
			}
			b.ReportMetric(float64(r.P50)/1000, "p50-ms")
			b.ReportMetric(float64(r.P99)/1000, "p99-ms")
			b.ReportMetric(float64(n), "runs")
		})
	}
}
