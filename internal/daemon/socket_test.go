package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestPluginFromInsideTheSandbox: a plugin tool is a command on the
// sandbox's PATH that runs on the host with a host secret; the secret never
// enters the sandbox or the audit log, and the plugin call's entry points at
// the exec that started it.
func TestPluginFromInsideTheSandbox(t *testing.T) {
	e := newEnv(t, "sock")
	a := e.agents[0]
	const secret = "s3cr3t-Value-4711-never-in-the-sandbox"
	if err := os.WriteFile(filepath.Join(e.home, "secrets.yaml"),
		[]byte(fmt.Sprintf("secrets:\n  tok: {value: %q, agents: [%q], tools: [sum]}\n", secret, a)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf(`gateway:
  clientBinary: %s
plugins:
  echo: {kind: builtin}
  sum:
    kind: command
    command: /bin/sh
    args: ["-c", 'printf %%s "$TOKEN" | sha256sum']
    env: {TOKEN: "{{secret:tok}}"}
  gh: {kind: command, command: /bin/true}
agents:
  %s:
    tools: [echo, sum]
`, clientBin, a)
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}

	res, err := e.call(a, "exec", map[string]any{"argv": []string{"echo", "it's", "a;b", "$(id)"}})
	if err != nil || *res.ExitCode != 0 || out(res, "stdout") != "it's a;b $(id)\n" {
		t.Fatalf("launcher echo: %v %+v", err, res)
	}
	execID := e.entries(audit.Filter{Agent: a, Tool: "exec"})[0].ID
	echo := e.entries(audit.Filter{Agent: a, Tool: "echo"})
	if len(echo) != 2 || echo[0].Parent != execID || echo[0].Type != "tool" || echo[0].Detail["peer"] == nil {
		t.Fatalf("plugin entries %+v, want parent %s", echo, execID)
	}

	// The handler used the secret: it printed its hash.
	res, err = e.call(a, "exec", map[string]any{"argv": []string{"sum"}})
	want := sha256.Sum256([]byte(secret))
	if err != nil || !strings.HasPrefix(fmt.Sprint(out(res, "stdout")), hex.EncodeToString(want[:])) {
		t.Fatalf("sum: %v %+v", err, res)
	}
	// It is nowhere in the sandbox: environment, any process's environ, files.
	res, err = e.call(a, "exec", map[string]any{"command": "env; cat /proc/*/environ; grep -rl " + secret[:12] + " /bin /etc /tmp /workspace /tools /run; true"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprint(out(res, "stdout")), secret[:12]) {
		t.Fatal("the secret is visible inside the sandbox")
	}
	// Nor in the audit log.
	logs, _ := os.ReadFile(filepath.Join(e.home, "logs", audit.CurrentFile))
	if strings.Contains(string(logs), secret) || !strings.Contains(string(logs), `"tool":"sum"`) {
		t.Fatal("the secret is in the audit log (or sum is not)")
	}

	// Only the allowed tools have launchers; a direct request for another is denied and audited.
	res, _ = e.call(a, "exec", map[string]any{"command": "ls /tools/bin; gh; echo exit=$?"})
	if got := fmt.Sprint(out(res, "stdout")); !strings.Contains(got, "echo\nsum\n") || strings.Contains(got, "gh\n") || !strings.Contains(got, "exit=127") {
		t.Fatalf("launchers: %q", got)
	}
	res, _ = e.call(a, "exec", map[string]any{"argv": []string{"/tools/toolgate-client", "call", "gh", "--", "pr", "list"}})
	if *res.ExitCode == 0 {
		t.Fatalf("gh through the socket: %+v", res.Output)
	}
	if got := e.entries(audit.Filter{Agent: a, Tool: "gh"}); len(got) != 1 || got[0].Rule != "tools.allowlist" {
		t.Fatalf("gh request not denied on record: %+v", got)
	}
	e.verify()
}
