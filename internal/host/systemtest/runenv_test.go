package systemtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestRunEnvAndSecretEnv: `toolgate run -e` passes a value as given;
// `--secret-env` passes a host secret resolved by the gateway, which the
// audit log records by name only.
func TestRunEnvAndSecretEnv(t *testing.T) {
	e := New(t, "runenv")
	a := e.Agents[0]
	const secret = "sk-ant-live-4711-only-in-this-run"
	e.WriteSecrets(fmt.Sprintf("secrets:\n  api: {value: %q, agents: [%q], tools: [exec]}\n  gitonly: {value: other-secret-value, agents: [%q], tools: [git]}\n", secret, a, a))
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	toolgate, _ := testenv.Binaries(t)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(toolgate, args...)
		cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
		outb, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(outb), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(outb), 0
	}
	sum := sha256.Sum256([]byte(secret))
	o, code := run("run", a, "-e", "PLAIN=plain value", "--secret-env", "KEY=api", "--",
		"sh", "-c", `printf '%s|' "$PLAIN"; printf %s "$KEY" | sha256sum`)
	if want := "plain value|" + hex.EncodeToString(sum[:]) + "  -\n"; code != 0 || o != want {
		t.Fatalf("run: exit %d %q, want %q", code, o, want)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", a, "--secret-env", "KEY", "--", "true"}, "--secret-env wants NAME=SECRET"},
		{[]string{"run", a, "-e", "=x", "--", "true"}, "--env wants NAME=VALUE"},
		{[]string{"run", a, "--secret-env", "KEY=missing", "--", "touch", "ran"}, `secret "missing" is not defined`},
		{[]string{"run", a, "--secret-env", "KEY=gitonly", "--", "touch", "ran"}, `not available to agent`},
		{[]string{"exec", a, "--secret-env", "1KEY=api", "--", "touch", "ran"}, "not valid"},
	} {
		if o, code := run(c.args...); code == 0 || !strings.Contains(o, c.want) || strings.Contains(o, "other-secret-value") {
			t.Errorf("%q: exit %d %q, want an error with %q", c.args, code, o, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(e.Home, "agents", a, "workspace", "ran")); err == nil {
		t.Error("a run whose secret could not be resolved ran anyway")
	}

	execs := e.Entries(audit.Filter{Agent: a, Tool: "exec"})
	if len(execs) == 0 {
		t.Fatal("no exec entries")
	}
	args, _ := json.Marshal(execs[0].Args)
	if !strings.Contains(string(args), `"secretEnv":{"KEY":"api"}`) || !strings.Contains(string(args), `"PLAIN":"plain value"`) {
		t.Errorf("first exec's audited args %s", args)
	}
	logs, _ := filepath.Glob(filepath.Join(e.Home, "logs", "*"))
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Fatalf("the secret is in %s", p)
		}
	}
}
