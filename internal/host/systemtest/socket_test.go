package systemtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestPluginFromInsideTheSandbox: a plugin tool is a command on the
// sandbox's PATH that runs on the host with a host secret; the secret never
// enters the sandbox or the audit log, and the plugin call's entry points at
// the exec that started it.
func TestPluginFromInsideTheSandbox(t *testing.T) {
	e := New(t, "sock")
	a := e.Agents[0]
	const secret = "s3cr3t-Value-4711-never-in-the-sandbox"
	e.WriteSecrets(fmt.Sprintf("secrets:\n  tok: {value: %q, agents: [%q], tools: [sum]}\n", secret, a))
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf(`gateway:
  clientBinary: %s
plugins:
  echo: {kind: builtin, builtin: toolgate-echo}
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
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}

	res, err := e.Call(a, "exec", map[string]any{"argv": []string{"echo", "it's", "a;b", "$(id)"}})
	if err != nil || *res.ExitCode != 0 || Out(res, "stdout") != "it's a;b $(id)\n" {
		t.Fatalf("launcher echo: %v %+v", err, res)
	}
	execID := e.Entries(audit.Filter{Agent: a, Tool: "exec"})[0].ID
	echo := e.Entries(audit.Filter{Agent: a, Tool: "echo"})
	if len(echo) != 2 || echo[0].Parent != execID || echo[0].Type != "tool" || echo[0].Detail["peer"] == nil {
		t.Fatalf("plugin entries %+v, want parent %s", echo, execID)
	}

	// The handler used the secret: it printed its hash.
	res, err = e.Call(a, "exec", map[string]any{"argv": []string{"sum"}})
	want := sha256.Sum256([]byte(secret))
	if err != nil || !strings.HasPrefix(fmt.Sprint(Out(res, "stdout")), hex.EncodeToString(want[:])) {
		t.Fatalf("sum: %v %+v", err, res)
	}
	// It is nowhere in the sandbox: environment, any process's environ, files.
	res, err = e.Call(a, "exec", map[string]any{"command": "env; cat /proc/*/environ; grep -rl " + secret[:12] + " /bin /etc /tmp /workspace /tools /run; true"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprint(Out(res, "stdout")), secret[:12]) {
		t.Fatal("the secret is visible inside the sandbox")
	}
	// Nor in the audit log.
	e.Entries(audit.Filter{}) // flushed
	logs, _ := os.ReadFile(filepath.Join(e.Home, "logs", audit.CurrentFile))
	if strings.Contains(string(logs), secret) || !strings.Contains(string(logs), `"tool":"sum"`) {
		t.Fatal("the secret is in the audit log (or sum is not)")
	}

	// Only the allowed tools have launchers; a direct request for another is denied and audited.
	res, _ = e.Call(a, "exec", map[string]any{"command": "ls /tools/bin; gh; echo exit=$?"})
	if got := fmt.Sprint(Out(res, "stdout")); !strings.Contains(got, "echo\nsum\n") || strings.Contains(got, "gh\n") || !strings.Contains(got, "exit=127") {
		t.Fatalf("launchers: %q", got)
	}
	res, _ = e.Call(a, "exec", map[string]any{"argv": []string{"/tools/toolgate-client", "call", "gh", "--", "pr", "list"}})
	if *res.ExitCode == 0 {
		t.Fatalf("gh through the socket: %+v", res.Output)
	}
	if got := e.Entries(audit.Filter{Agent: a, Tool: "gh"}); len(got) != 1 || got[0].Rule != "tools.allowlist" {
		t.Fatalf("gh request not denied on record: %+v", got)
	}
	e.Verify()
}

// TestClaudeCodeHooksThroughTheDaemon: the gate inside a sandbox is decided
// by the agent's rules, and a transcript ingested through the CLI is recorded
// as observations once.
func TestClaudeCodeHooksThroughTheDaemon(t *testing.T) {
	e := New(t, "hooks")
	a := e.Agents[0]
	e.WriteConfig("      - name: no-rm-hook\n        deny: 'kind == \"hook\" && command.contains(\"rm -rf\")'\n        reason: no recursive removal by Claude either\n")
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	input := func(cmd string) string {
		return fmt.Sprintf(`{"session_id":"s1","transcript_path":"/tmp/t.jsonl","cwd":"/workspace","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":%q},"tool_use_id":"toolu_%d"}`, cmd, len(cmd))
	}
	gate := func(cmd string) string {
		res, err := e.Call(a, "exec", map[string]any{"argv": []string{"/tools/toolgate-client", "hook", "pre-tool-use"}, "stdin": input(cmd)})
		if err != nil || *res.ExitCode != 0 {
			t.Fatalf("gate: %v %+v", err, res)
		}
		return fmt.Sprint(Out(res, "stdout"))
	}
	if got := gate("ls -la"); !strings.Contains(got, `"permissionDecision":"allow"`) {
		t.Fatalf("allowed Bash: %s", got)
	}
	if got := gate("rm -rf /workspace"); !strings.Contains(got, `"permissionDecision":"deny"`) || !strings.Contains(got, "no recursive removal by Claude") {
		t.Fatalf("denied Bash: %s", got)
	}
	if got := e.Entries(audit.Filter{Agent: a, Type: "hook", Decision: "deny"}); len(got) != 1 || got[0].Tool != "Bash" || got[0].Session != "s1" {
		t.Fatalf("hook denial on record: %+v", got)
	}

	toolgate, _ := testenv.Binaries(t)
	sample := "/work/shared/reference/claude-code-samples/stream-json-deny-json.jsonl"
	if _, err := os.Stat(sample); err != nil {
		sample = "../../proto/hooks/testdata/claude-code-samples/stream-json-deny-json.jsonl"
	}
	// Ingesting twice records nothing the second time.
	for i, again := range []bool{false, true} {
		cmd := exec.Command(toolgate, "ingest", "stream-json", "--agent", a, sample)
		cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
		o, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(o), "recorded 0 ") != again {
			t.Fatalf("ingest #%d: %v %s", i+1, err, o)
		}
	}
	observed := e.Entries(audit.Filter{Agent: a, Type: "observed"})
	if len(observed) == 0 || observed[0].Decision == "allow" || observed[0].Decision == "deny" {
		t.Fatalf("observations: %+v", observed)
	}
	e.Verify()
}
