package systemtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/daemon"
	"github.com/toolgate/toolgate/internal/host/door/adminapi"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func TestCoreToolsEndToEnd(t *testing.T) {
	e := New(t, "core")
	a := e.Agents[0]

	res, err := e.Call(a, "exec", map[string]any{"argv": []string{"sh", "-c", "echo hi; echo oops >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if *res.ExitCode != 3 || Out(res, "stdout") != "hi\n" || Out(res, "stderr") != "oops\n" {
		t.Fatalf("exec result %+v", res.Output)
	}

	// File names that would break any shell string.
	for _, name := range []string{`it's "quoted".txt`, "with space.txt", "new\nline.txt", "$(touch pwned).txt", "semi;colon`x`.txt"} {
		path := "odd/" + name
		content := "content of " + name
		if _, err := e.Call(a, "write", map[string]any{"path": path, "content": content}); err != nil {
			t.Fatalf("write %q: %v", name, err)
		}
		if _, err := e.Call(a, "patch", map[string]any{"path": path, "old": "content", "new": "body"}); err != nil {
			t.Fatalf("patch %q: %v", name, err)
		}
		res, err := e.Call(a, "read", map[string]any{"path": path})
		if err != nil || Out(res, "content") != "body of "+name {
			t.Fatalf("read %q: %v %v", name, err, res)
		}
	}
	if _, err := os.Stat(filepath.Join(e.Home, "agents", a, "workspace", "pwned")); err == nil {
		t.Fatal("a file name was run as a command")
	}

	// Traversal resolves inside the container's view, and policy sees the normalised path.
	res, err = e.Call(a, "read", map[string]any{"path": "../../etc/passwd"})
	if err != nil || !strings.Contains(Out(res, "content").(string), "agent:x:1000") {
		t.Fatalf("traversal read: %v %+v", err, res)
	}
	got := e.Entries(audit.Filter{Agent: a, Tool: "read"})
	if len(got) == 0 {
		t.Fatal("no audit entry for read")
	}

	// A symlink in the workspace pointing at / reaches the container's root, never the host's.
	if _, err := e.Call(a, "exec", map[string]any{"argv": []string{"ln", "-s", "/", "root-link"}}); err != nil {
		t.Fatal(err)
	}
	hostMarker := filepath.Join("/", "toolgate-host-marker-"+filepath.Base(e.Home))
	if err := os.WriteFile(hostMarker, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(hostMarker)
	if _, err := e.Call(a, "read", map[string]any{"path": "root-link/" + filepath.Base(hostMarker)}); err == nil {
		t.Fatal("read through a symlink reached a host file")
	}
	if _, err := e.Call(a, "write", map[string]any{"path": "root-link/etc/evil", "content": "x"}); err == nil {
		t.Fatal("write through a symlink into the read-only root succeeded")
	}

	// Invalid UTF-8 is refused with a clear error, binary goes through base64.
	bin := []byte{0xff, 0xfe, 0, 1, 2}
	if _, err := e.Call(a, "write", map[string]any{"path": "bin.dat", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Call(a, "read", map[string]any{"path": "bin.dat"}); err == nil || !strings.Contains(err.Error(), "base64") {
		t.Fatalf("binary read without base64: %v", err)
	}

	// A write over the limit is refused before it reaches the sandbox; the old file stays.
	big := strings.Repeat("x", 50<<20)
	_, err = e.Call(a, "write", map[string]any{"path": "odd/with space.txt", "content": big})
	var we *api.Error
	if !errors.As(err, &we) || we.Code != "bad_request" {
		t.Fatalf("50 MiB write: %v", err)
	}
	if res, _ := e.Call(a, "read", map[string]any{"path": "odd/with space.txt"}); Out(res, "content") != "body of with space.txt" {
		t.Fatal("refused write changed the file")
	}

	// 100 MiB of output is capped with a visible marker; the call still ends normally.
	res, err = e.Call(a, "exec", map[string]any{"command": "head -c 104857600 /dev/zero | tr '\\0' x; echo done >&2"})
	if err != nil {
		t.Fatal(err)
	}
	if s := Out(res, "stdout").(string); len(s) > 70<<10 || !strings.Contains(s, "output truncated") {
		t.Fatalf("100 MiB output: %d bytes, marker missing", len(s))
	}

	// A command that never ends is killed at its timeout, with the process tree.
	res, err = e.Call(a, "exec", map[string]any{"command": "sleep 1000 & sleep 1000", "timeout": "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if to, _ := Out(res, "timedOut").(bool); !to {
		t.Fatalf("endless command: %+v", res.Output)
	}
	res, _ = e.Call(a, "exec", map[string]any{"command": "ps -o comm | grep -c sleep || true"})
	if strings.TrimSpace(Out(res, "stdout").(string)) != "0" {
		t.Fatalf("sleep processes survived the timeout: %v", Out(res, "stdout"))
	}

	// Denied by a rule: recorded once, nothing ran.
	_, err = e.Call(a, "exec", map[string]any{"command": "rm -rf /workspace"})
	if !errors.As(err, &we) || we.Code != "denied" || we.Rule != "no-rm-rf" {
		t.Fatalf("rule denial: %v", err)
	}
	if got := e.Entries(audit.Filter{ID: we.ID}); len(got) != 1 || got[0].Decision != "deny" {
		t.Fatalf("denied call has %d entries", len(got))
	}
	if _, err := os.Stat(filepath.Join(e.Home, "agents", a, "workspace", "odd")); err != nil {
		t.Fatal("denied rm -rf ran")
	}
	e.Verify()
}

func TestAdminAPIRefusals(t *testing.T) {
	e := New(t, "api")
	a := e.Agents[0]
	cases := []struct {
		name, path, token, body string
		status                  int
		code                    string
	}{
		{"no token", "/v1/agents/" + a + "/tools/exec/call", "", `{"command":"true"}`, 401, "unauthorized"},
		{"wrong token", "/v1/agents/" + a + "/tools/exec/call", "tg_wrong", `{"command":"true"}`, 401, "unauthorized"},
		{"malformed JSON", "/v1/agents/" + a + "/tools/exec/call", e.Token, `{"command":`, 400, "bad_request"},
		{"unknown agent", "/v1/agents/nobody/tools/exec/call", e.Token, `{"command":"true"}`, 404, "not_found"},
		{"unknown tool", "/v1/agents/" + a + "/tools/teleport/call", e.Token, `{}`, 404, "not_found"},
		{"unknown field", "/v1/agents/" + a + "/tools/read/call", e.Token, `{"path":"x","evil":1}`, 400, "bad_request"},
	}
	for _, c := range cases {
		status, body := e.Raw("POST", c.path, c.token, c.body)
		errBody, _ := body["error"].(map[string]any)
		if status != c.status || errBody["code"] != c.code {
			t.Errorf("%s: got %d %v, want %d %s", c.name, status, body, c.status, c.code)
			continue
		}
		// Every refused call is on record with its id (token refusals are checked below).
		if id, _ := errBody["id"].(string); c.status != 401 {
			if got := e.Entries(audit.Filter{ID: id}); id == "" || len(got) != 1 || got[0].Decision != "deny" {
				t.Errorf("%s: refusal not audited (id %q, %d entries)", c.name, id, len(got))
			}
		}
	}
	// A refused token is audited as an attempt with no agent.
	if got := e.Entries(audit.Filter{Type: string(gateway.KindAdmin)}); len(got) != 2 || got[0].Agent != "" || got[0].Rule != "auth.token" {
		t.Fatalf("admin refusals in audit: %+v", got)
	}
	// A body over the limit gets a clear 413.
	status, body := e.Raw("POST", "/v1/agents/"+a+"/tools/write/call", e.Token, strings.Repeat(" ", adminapi.DefaultMaxBody+1))
	if status != 413 {
		t.Fatalf("oversized body: %d %v", status, body)
	}
	e.Verify()
}

func TestConcurrentCallsAcrossAgents(t *testing.T) {
	e := New(t, "c1", "c2", "c3", "c4")
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := e.Agents[i%len(e.Agents)]
			res, err := e.Call(a, "exec", map[string]any{"argv": []string{"echo", fmt.Sprint(i)}})
			if err == nil && Out(res, "stdout") != fmt.Sprint(i)+"\n" {
				err = fmt.Errorf("call %d got %v", i, Out(res, "stdout"))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := e.Entries(audit.Filter{Type: "core_tool"}); len(got) != 2*n {
		t.Fatalf("%d audit entries for %d calls", len(got), n)
	}
	e.Verify()
}

func TestSandboxKilledMidCall(t *testing.T) {
	e := New(t, "kill")
	a := e.Agents[0]
	if _, err := e.Call(a, "exec", map[string]any{"argv": []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Call(a, "exec", map[string]any{"argv": []string{"sleep", "30"}})
		done <- err
	}()
	time.Sleep(time.Second) // let the exec start
	if out, err := exec.Command("docker", "kill", e.ContainerID(a)).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stopped") {
			t.Fatalf("call in a killed sandbox: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("call hung after its sandbox was killed")
	}
	// The next call gets a working sandbox again.
	res, err := e.Call(a, "exec", map[string]any{"argv": []string{"echo", "back"}})
	if err != nil || Out(res, "stdout") != "back\n" {
		t.Fatalf("after the kill: %v %+v", err, res)
	}
	e.Verify()
}

func TestRestartReattachesAndReloadKeepsCallsInFlight(t *testing.T) {
	e := New(t, "restart")
	a := e.Agents[0]
	if _, err := e.Call(a, "write", map[string]any{"path": "keep.txt", "content": "kept"}); err != nil {
		t.Fatal(err)
	}
	before, err := e.Admin.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Start()
	after, err := e.Admin.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if before[0].Container == "" || before[0].Container != after[0].Container || after[0].State != "running" {
		t.Fatalf("restart did not re-attach: %+v → %+v", before, after)
	}
	res, err := e.Call(a, "read", map[string]any{"path": "keep.txt"})
	if err != nil || Out(res, "content") != "kept" {
		t.Fatalf("workspace after restart: %v", err)
	}

	// A reload while a call runs: the call finishes, the new rule applies to the next.
	slow := make(chan error, 1)
	go func() {
		res, err := e.Call(a, "exec", map[string]any{"command": "sleep 2; echo finished"})
		if err == nil && Out(res, "stdout") != "finished\n" {
			err = fmt.Errorf("in-flight call got %v", Out(res, "stdout"))
		}
		slow <- err
	}()
	time.Sleep(500 * time.Millisecond)
	e.WriteConfig("      - name: no-cat\n        deny: 'tool == \"exec\" && \"cat\" in argv'\n        reason: no cat\n")
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	_, err = e.Call(a, "exec", map[string]any{"argv": []string{"cat", "keep.txt"}})
	var we *api.Error
	if !errors.As(err, &we) || we.Rule != "no-cat" {
		t.Fatalf("reloaded rule not applied: %v", err)
	}
	// An agent taken out of the config loses its sandbox and its calls.
	removed := testenv.Prefix() + "gone"
	e.Agents = append(e.Agents, removed)
	e.WriteConfig("")
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	goneID := e.ContainerID(removed)
	e.Agents = e.Agents[:len(e.Agents)-1]
	e.WriteConfig("")
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "inspect", goneID).CombinedOutput(); err == nil {
		t.Fatalf("the removed agent's container is still there: %s", out[:min(len(out), 200)])
	}
	if _, err := e.Call(removed, "exec", map[string]any{"argv": []string{"true"}}); err == nil {
		t.Fatal("a removed agent's call ran")
	}
	// An invalid config is refused and the running one stays.
	if err := os.WriteFile(e.ConfigPath, []byte("agents: [oops"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Daemon.Reload(context.Background()); err == nil {
		t.Fatal("invalid config reloaded")
	}
	if _, err := e.Call(a, "exec", map[string]any{"argv": []string{"true"}}); err != nil {
		t.Fatalf("after a refused reload: %v", err)
	}
	e.Verify()
}

func TestDockerUnavailable(t *testing.T) {
	testenv.NeedDocker(t) // the binaries and config need the same set-up as the rest
	home := t.TempDir()
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf("gateway:\n  clientBinary: %s\nagents:\n  demo: {}\n", clientBin)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(home, "no-docker.sock"))
	_, err := daemon.Start(context.Background(), daemon.Options{Home: home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Docker Engine") {
		t.Fatalf("want a clear Docker error, got %v", err)
	}
}

// TestCLI runs the real toolgate binary against the daemon: exit codes pass
// through, denials exit 126.
func TestCLI(t *testing.T) {
	e := New(t, "cli")
	a := e.Agents[0]
	run := e.CLI
	if o, code := run("", "exec", a, "--", "sh", "-c", "echo hi; exit 3"); o != "hi\n" || code != 3 {
		t.Fatalf("exec: %q exit %d", o, code)
	}
	if o, code := run("hello\n", "write", a, "notes/a.txt"); code != 0 {
		t.Fatalf("write: %q %d", o, code)
	}
	if o, code := run("", "patch", a, "notes/a.txt", "--old", "hello", "--new", "bye"); code != 0 {
		t.Fatalf("patch: %q %d", o, code)
	}
	if o, code := run("", "read", a, "notes/a.txt"); o != "bye\n" || code != 0 {
		t.Fatalf("read: %q %d", o, code)
	}
	// exec -i: stdin byte for byte, read while output is already coming
	// back (a gateway that held the output until the input ended, or
	// dropped the input once output began, fails the second).
	if o, code := run("a\xffb\x00c", "exec", a, "-i", "--", "od", "-An", "-tx1"); o != " 61 ff 62 00 63\n" || code != 0 {
		t.Fatalf("exec -i, binary stdin: %q %d", o, code)
	}
	if o, code := run(strings.Repeat("x", 5_000_000), "exec", a, "-i", "--", "sh", "-c", "echo start; wc -c"); o != "start\n5000000\n" || code != 0 {
		t.Fatalf("exec -i, output before the input ends: %q %d", o, code)
	}
	if o, code := run("to run\x00", "run", a, "-i", "--", "od", "-c", "-An"); !strings.Contains(o, "t   o       r   u   n  \\0") || code != 0 {
		t.Fatalf("run -i: %q %d", o, code)
	}
	// A diff from standard input; usage mistakes said before anything is sent.
	diff := "--- a/notes/a.txt\n+++ b/notes/a.txt\n@@ -1 +1 @@\n-bye\n+ciao\n"
	if o, code := run(diff, "patch", a, "notes/a.txt", "--diff", "-"); code != 0 {
		t.Fatalf("patch --diff -: %q %d", o, code)
	}
	for _, args := range [][]string{{"--old", "ciao"}, {"--new", "x"}, {"--diff", "-", "--old", "a", "--new", "b"}, {}} {
		if o, code := run(diff, append([]string{"patch", a, "notes/a.txt"}, args...)...); code != 125 || !strings.Contains(o, "usage: toolgate patch") {
			t.Fatalf("patch %q: %q %d, want a usage error", args, o, code)
		}
	}
	if o, code := run("", "read", a, "notes/a.txt", "--offset", "-1"); code != 125 || !strings.Contains(o, "usage: toolgate read") {
		t.Fatalf("read --offset -1: %q %d, want a usage error", o, code)
	}
	if o, code := run("", "read", a, "notes/a.txt"); o != "ciao\n" || code != 0 {
		t.Fatalf("read after the diff: %q %d", o, code)
	}
	if o, code := run("", "patch", a, "notes/a.txt", "--old", "ciao", "--new", "bye"); code != 0 {
		t.Fatalf("patch back: %q %d", o, code)
	}
	// call's arguments as the third word or with --args, not both.
	for _, args := range [][]string{{`{"path":"notes/a.txt"}`}, {"--args", `{"path":"notes/a.txt"}`}} {
		if o, code := run("", append([]string{"call", a, "read"}, args...)...); code != 0 || !strings.Contains(o, `"content": "bye\n"`) {
			t.Fatalf("call %q: %q %d", args, o, code)
		}
	}
	if o, code := run("", "call", a, "read", "{}", "--args", "{}"); code != 125 || !strings.Contains(o, "give the arguments once") {
		t.Fatalf("call with two argument sets: %q %d", o, code)
	}
	if o, code := run("", "exec", a, "-c", "rm -rf /"); code != 126 || !strings.Contains(o, "no recursive removal") {
		t.Fatalf("denied exec: %q %d", o, code)
	}
	if o, code := run("", "audit", "verify"); code != 0 || !strings.HasPrefix(o, "ok:") {
		t.Fatalf("audit verify: %q %d", o, code)
	}
	if o, code := run("", "audit", "tail", "--agent", a, "--decision", "deny"); code != 0 || !strings.Contains(o, "no-rm-rf") {
		t.Fatalf("audit tail: %q %d", o, code)
	}
	if o, code := run("", "agents"); code != 0 || !strings.Contains(o, a) || !strings.Contains(o, "running") {
		t.Fatalf("agents: %q %d", o, code)
	}
}

// TestPluginsThroughAdminAPI: plugin tools run on the host through the same
// pipeline: the allowlist decides which exist for an agent, CEL rules see argv.
func TestPluginsThroughAdminAPI(t *testing.T) {
	e := New(t, "plug")
	a := e.Agents[0]
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf(`gateway:
  clientBinary: %s
plugins:
  echo: {kind: builtin, builtin: toolgate-echo}
  git: {kind: command, command: /usr/bin/git, cwd: workspace}
  gh: {kind: command, command: /bin/true}
agents:
  %s:
    tools: [echo, git]
    rules:
      - name: no-force-push
        deny: 'tool == "git" && args.argv[0] == "push" && "--force" in args.argv'
        reason: no force push
`, clientBin, a)
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := e.Call(a, "echo", map[string]any{"argv": []string{"hello", "$(id)", "a;b"}})
	if err != nil || *res.ExitCode != 0 {
		t.Fatalf("echo: %v %+v", err, res)
	}
	if got := fmt.Sprint(Out(res, "stdout")); got != "hello $(id) a;b\n" {
		t.Fatalf("echo printed %q", got)
	}
	// git runs on the host in the agent's workspace: it is not a repository.
	res, err = e.Call(a, "git", map[string]any{"argv": []string{"status"}})
	if err != nil || *res.ExitCode == 0 || !strings.Contains(fmt.Sprint(Out(res, "stderr")), "not a git repository") {
		t.Fatalf("git status: %v %+v", err, res)
	}
	var we *api.Error
	_, err = e.Call(a, "git", map[string]any{"argv": []string{"push", "--force"}})
	if !errors.As(err, &we) || we.Rule != "no-force-push" {
		t.Fatalf("force push: %v", err)
	}
	_, err = e.Call(a, "gh", map[string]any{"argv": []string{"pr", "list"}})
	if !errors.As(err, &we) || we.Rule != "tools.allowlist" {
		t.Fatalf("gh outside the allowlist: %v", err)
	}
	_, err = e.Call(a, "git", map[string]any{"argv": []string{"status"}, "cwd": "/etc"})
	if !errors.As(err, &we) || we.Code != "bad_request" {
		t.Fatalf("cwd outside the workspace: %v", err)
	}
	if got := e.Entries(audit.Filter{Agent: a, Type: "tool"}); len(got) < 6 {
		t.Fatalf("plugin calls in audit: %d", len(got))
	}
	e.Verify()
}

// TestShutdownRecordsResultsOfCallsInFlight: a call still running when the
// daemon shuts down (the agent sockets are closed, not drained) gets its
// result entry before the audit log closes.
func TestShutdownRecordsResultsOfCallsInFlight(t *testing.T) {
	e := New(t, "inflight")
	a := e.Agents[0]
	call := &gateway.Call{Agent: a, Tool: "exec", Args: json.RawMessage(`{"command":"sleep 1"}`), Via: "socket"}
	done := make(chan error, 1)
	go func() {
		_, err := e.Daemon.Gateway().Handle(context.Background(), call, nil)
		done <- err
	}()
	dir := filepath.Join(e.Home, "logs")
	var id string // the call's decision is on disk: it is running
	for id == "" {
		time.Sleep(20 * time.Millisecond)
		_ = audit.Query(dir, audit.Filter{Agent: a, Tool: "exec"}, func(en *gateway.Entry) error { id = en.ID; return nil })
	}
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Daemon = nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	es, err := audit.Find(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[1].Phase != gateway.PhaseResult {
		t.Fatalf("entries of a call running at shutdown: %d, want its decision and result", len(es))
	}
}
