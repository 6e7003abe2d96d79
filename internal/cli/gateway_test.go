package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/cli/front"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The CLI (the front, then toolgate-cli) hands a gateway command to
// toolgate-gateway beside it with the whole command line — flags before and after the command,
// help, shell completion, the exit status — and without it says what is
// missing.
func TestGatewayCommandsRunToolgateGateway(t *testing.T) {
	toolgate, _ := testenv.Binaries(t)
	home := t.TempDir()
	run := func(bin string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+filepath.Join(home, "not-this-one"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}
	if out, code := run(toolgate, "--home", home, "init"); code != 0 || !strings.Contains(out, "wrote "+filepath.Join(home, "config.yaml")) {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	if out, code := run(toolgate, "config", "check", "--home", home); code != 0 || !strings.Contains(out, ": ok (1 agent, 0 plugins)") {
		t.Fatalf("config check: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"policy", "--help"}, {"help", "policy"}, {"policy", "-h"}} {
		if out, code := run(toolgate, args...); code != 0 || !strings.Contains(out, "replay") || !strings.Contains(out, "eval") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	for req, want := range map[string]string{"__complete": "replay\tRe-decide", "__completeNoDesc": "replay\n"} {
		if out, code := run(toolgate, req, "policy", ""); code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "eval") {
			t.Errorf("completing a gateway command's subcommands (%s): exit %d\n%s", req, code, out)
		}
	}
	if out, code := run(toolgate, "--home", home, "policy", "tset"); code != ExitError || !strings.Contains(out, "did you mean test?") {
		t.Errorf("a typo in a gateway command: exit %d\n%s", code, out)
	}
	bad := filepath.Join(home, "bad.yaml")
	if err := os.WriteFile(bad, []byte("agents: {Bad Name: {}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := run(toolgate, "--home", home, "--config", bad, "config", "check"); code != ExitError || !strings.Contains(out, "bad.yaml:1") {
		t.Errorf("config check of a bad file: exit %d\n%s", code, out)
	}

	// The CLI alone: the front and the Go CLI it runs, no gateway.
	dir := t.TempDir()
	alone := filepath.Join(dir, "toolgate")
	for _, name := range []string{"toolgate", front.CLIBinary} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(toolgate), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, code := run(alone, "--home", home, "serve")
	if code != ExitError || !strings.Contains(out, "`toolgate serve` runs toolgate-gateway, which is not installed beside toolgate ("+filepath.Join(filepath.Dir(alone), "toolgate-gateway")+")") {
		t.Errorf("serve without toolgate-gateway: exit %d\n%s", code, out)
	}
	if out, code := run(alone, "--home", home, "agents"); code != ExitError || !strings.Contains(out, adminclient.ErrDaemonDown.Error()) {
		t.Errorf("a client command needs no toolgate-gateway: exit %d\n%s", code, out)
	}
	// The audit commands ask a running gateway; with none, the index is
	// toolgate-gateway's to read, and so are tail and verify.
	for _, args := range [][]string{{"audit", "query", "--agent", "a"}, {"audit", "show", "x"}, {"audit", "reindex"}, {"audit", "tail"}} {
		want := "`toolgate " + strings.Join(args[:2], " ") + "` runs toolgate-gateway, which is not installed"
		if out, code := run(alone, append([]string{"--home", home}, args...)...); code != ExitError || !strings.Contains(out, want) {
			t.Errorf("%v with no gateway running and no toolgate-gateway: exit %d\n%s", args, code, out)
		}
	}
}
