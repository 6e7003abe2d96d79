package modeldoor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/coretools"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/fakeprovider"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const dockerKey = "sk-ant-host-only-4b1d7e0c9a"

// A process in a real sandbox (network none) calls the model base URL its
// environment names and gets the streamed answer; the fake upstream sees
// the host's key; the key is in no process's environment, no file of the
// sandbox and not in the audit log; the model call links to the exec that
// made it.
func TestDockerSandboxModelDoor(t *testing.T) {
	testenv.NeedDocker(t)
	_, clientBin := testenv.Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fake := fakeprovider.New(t)

	dir := t.TempDir()
	agent := testenv.Prefix() + "model"
	t.Cleanup(func() { _ = testenv.RemoveSandboxes(testenv.Prefix()) })
	secretsYAML := fmt.Sprintf("secrets:\n  anthropic_key: {value: %q, agents: [%q], tools: [anthropic]}\n", dockerKey, agent)
	if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), []byte(secretsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(dir, "c.yaml", []byte(fmt.Sprintf(`gateway:
  models:
    anthropic: {api: anthropic, url: %q, secret: anthropic_key, private: allow}
agents:
  %s:
    workspace: %s
    model: {providers: [anthropic]}
`, fake.URL, agent, filepath.Join(dir, agent, "workspace"))))
	if err != nil {
		t.Fatal(err)
	}
	b, err := assemble.Build(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := docker.New(ctx, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.BuildDefaultImage(ctx, proto.DefaultImage, false); err != nil {
		t.Fatal(err)
	}
	specs := b.Specs(clientBin)
	if err := m.SetSpecs(specs); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "logs")
	aw, err := audit.Open(logs, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close()
	gw := gateway.New(gateway.Options{Audit: aw, Sandboxes: m}, b.Snapshot)
	srv := agentsock.New(gw, agentsock.Options{})
	defer srv.Close()
	srv.Handle("POST "+modeldoor.Pattern, modeldoor.New(gw))
	uid, gid, _ := sandbox.ParseUser(specs[0].UserOrDefault())
	if err := srv.Serve(agent, filepath.Join(specs[0].SocketDir(), proto.SocketName), uid, gid); err != nil {
		t.Fatal(err)
	}
	exec := func(session string, argv ...string) (string, *coretools.ExecOutput) {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"argv": argv, "timeout": 60})
		call := &gateway.Call{Agent: agent, Tool: "exec", Args: args, Via: "test", Session: session}
		res, err := gw.Handle(ctx, call, nil)
		if err != nil {
			t.Fatal(err)
		}
		return call.ID, res.Output.(*coretools.ExecOutput)
	}

	_, out := exec("", "sh", "-c", "echo $ANTHROPIC_BASE_URL $ANTHROPIC_API_KEY")
	if !strings.Contains(out.Stdout, "http://127.0.0.1:3129/~") || !strings.Contains(out.Stdout, proto.ModelPlaceholderKey) {
		t.Fatalf("model env: %+v", out)
	}
	req := `{"model":"fake-tool","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	callID, out := exec("sess-docker", "sh", "-c", `wget -q -O - --header "x-api-key: $ANTHROPIC_API_KEY" --header "content-type: application/json" --post-data '`+req+`' "$ANTHROPIC_BASE_URL/v1/messages"`)
	if out.ExitCode != 0 || !strings.Contains(out.Stdout, "event: message_stop") || !strings.Contains(out.Stdout, fakeprovider.AnthropicToolID) {
		t.Fatalf("model call from the sandbox: %+v", out)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Key() != dockerKey {
		t.Fatalf("upstream saw %d requests, key %q", len(reqs), reqs[0].Key())
	}

	// The key is nowhere in the sandbox: no process's environment (init's
	// is the container's own), no file outside /proc, /sys and /dev.
	// The key is split in the command, so the exec's own argv (recorded
	// without redaction here) does not hold it.
	split := `"` + dockerKey[:8] + `""` + dockerKey[8:] + `"`
	_, out = exec("", "sh", "-c", `cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c ANTHROPIC_API_KEY; `+
		`cat /proc/[0-9]*/environ 2>/dev/null | grep -c `+split+`; `+
		`for d in /*; do case $d in /proc|/sys|/dev) ;; *) grep -rl `+split+` $d 2>/dev/null;; esac; done; echo scanned`)
	lines := strings.Fields(out.Stdout)
	if len(lines) != 3 || lines[0] == "0" || lines[1] != "0" || lines[2] != "scanned" {
		t.Fatalf("the sandbox holds the key (or the scan saw no environments): %q %q", out.Stdout, out.Stderr)
	}

	var model []*gateway.Entry
	if err := audit.Query(logs, audit.Filter{Type: string(gateway.KindModel)}, func(e *gateway.Entry) error {
		model = append(model, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(model) != 2 || model[1].Phase != gateway.PhaseResult || model[1].Parent != callID || model[1].Session != "sess-docker" ||
		model[1].Detail["outputTokens"] != float64(fakeprovider.OutputTokens) {
		t.Fatalf("model entries %+v", model)
	}
	aw.Close()
	files, _ := filepath.Glob(filepath.Join(logs, "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), dockerKey) {
			t.Fatalf("%s holds the key", f)
		}
	}
}
