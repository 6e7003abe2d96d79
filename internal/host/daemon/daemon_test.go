package daemon

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/door/adminapi"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// env is a toolgate home with a running daemon.
type env struct {
	t      testing.TB
	home   string
	cfg    string
	d      *Daemon
	c      *adminclient.Client
	token  string
	agents []string
	// extra is YAML added to the config: gateway keys (indented) then
	// top-level sections, before agents.
	extra envExtra
}

// envExtra adds to the test config.
type envExtra struct {
	Gateway, Top, AgentKeys string
}

// containerID is the id of the agent's sandbox container, as the daemon's
// manager reports it (the test does not depend on how containers are named).
func (e *env) containerID(agent string) string {
	e.t.Helper()
	st, err := e.d.sandboxes.Status(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range st {
		if s.Agent == agent && s.ContainerID != "" {
			return s.ContainerID
		}
	}
	e.t.Fatalf("no container for agent %s: %+v", agent, st)
	return ""
}

// agentYAML is one agent's config; %s is the agent name.
const agentYAML = `  %s:
    limits: {maxWrite: 16m, maxOutput: 64k, execTimeout: 20s}
    rules:
      - name: no-rm-rf
        deny: 'tool == "exec" && command.contains("rm -rf")'
        reason: no recursive removal
`

func newEnv(t testing.TB, agents ...string) *env {
	t.Helper()
	return newEnvWith(t, envExtra{}, agents...)
}

func newEnvWith(t testing.TB, extra envExtra, agents ...string) *env {
	t.Helper()
	e := newHome(t, extra, agents...)
	e.start()
	return e
}

// newHome is a home with a config and an admin token, its daemon not
// started yet (stopped at the end of the test when it is).
func newHome(t testing.TB, extra envExtra, agents ...string) *env {
	t.Helper()
	testenv.NeedDocker(t)
	_, clientBin := testenv.Binaries(t)
	home := t.TempDir()
	e := &env{t: t, home: home, cfg: filepath.Join(home, "config.yaml"), extra: extra}
	for _, a := range agents {
		e.agents = append(e.agents, testenv.Prefix()+a)
	}
	e.writeConfig("")
	store, err := auth.OpenStore(filepath.Join(home, auth.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	e.token, _, err = store.Create(auth.ScopeAdmin, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, api.TokenFile), []byte(e.token), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = clientBin
	t.Cleanup(func() {
		if e.d != nil {
			_ = e.d.Shutdown(context.Background())
		}
	})
	return e
}

// writeSecrets writes the gateway's host secrets file (secrets.yaml).
func (e *env) writeSecrets(yaml string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.home, "secrets.yaml"), []byte(yaml), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) writeConfig(extraRules string) {
	_, clientBin := testenv.Binaries(e.t)
	var b strings.Builder
	fmt.Fprintf(&b, "gateway:\n  clientBinary: %s\n%s%sagents:\n", clientBin, e.extra.Gateway, e.extra.Top)
	for _, a := range e.agents {
		fmt.Fprintf(&b, agentYAML, a)
		b.WriteString(extraRules)
		b.WriteString(e.extra.AgentKeys)
	}
	if err := os.WriteFile(e.cfg, []byte(b.String()), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) start() {
	e.t.Helper()
	e.launch()
	<-e.d.upDone // the tests below want their sandboxes running
}

// launch starts the daemon without waiting for its sandboxes.
func (e *env) launch() {
	e.t.Helper()
	d, err := Start(context.Background(), Options{Home: e.home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		e.t.Fatal(err)
	}
	e.d = d
	if e.c, err = adminclient.Dial(e.home); err != nil {
		e.t.Fatal(err)
	}
}

// cli runs the toolgate command on e's home with stdin; it returns the
// command's output (stdout and stderr) and exit status.
func (e *env) cli(stdin string, args ...string) (string, int) {
	e.t.Helper()
	toolgate, _ := testenv.Binaries(e.t)
	cmd := exec.Command(toolgate, args...)
	cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.home)
	cmd.Stdin = strings.NewReader(stdin)
	outb, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(outb), ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return string(outb), 0
}

func (e *env) call(agent, tool string, args any) (*gateway.Result, error) {
	return e.c.Call(context.Background(), agent, tool, args, nil, nil)
}

// raw sends an admin API request with the given token and body.
func (e *env) raw(method, path, token, body string) (int, map[string]any) {
	e.t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(e.home, api.SocketName))
	}}}
	req, _ := http.NewRequest(method, "http://toolgate"+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func (e *env) entries(f audit.Filter) []*gateway.Entry {
	if err := e.d.audit.Flush(); err != nil { // result entries are written behind the answer
		e.t.Fatal(err)
	}
	var out []*gateway.Entry
	if err := audit.Query(filepath.Join(e.home, "logs"), f, func(en *gateway.Entry) error {
		out = append(out, en)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) verify() {
	e.t.Helper()
	if err := e.d.audit.Flush(); err != nil {
		e.t.Fatal(err)
	}
	rep, err := audit.Verify(filepath.Join(e.home, "logs"))
	if err != nil || !rep.OK() {
		e.t.Fatalf("audit verify: %v %v", err, rep.Bad)
	}
}

func out(res *gateway.Result, key string) any {
	m, _ := res.Output.(map[string]any)
	return m[key]
}

func TestCoreToolsEndToEnd(t *testing.T) {
	e := newEnv(t, "core")
	a := e.agents[0]

	res, err := e.call(a, "exec", map[string]any{"argv": []string{"sh", "-c", "echo hi; echo oops >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if *res.ExitCode != 3 || out(res, "stdout") != "hi\n" || out(res, "stderr") != "oops\n" {
		t.Fatalf("exec result %+v", res.Output)
	}

	// File names that would break any shell string.
	for _, name := range []string{`it's "quoted".txt`, "with space.txt", "new\nline.txt", "$(touch pwned).txt", "semi;colon`x`.txt"} {
		path := "odd/" + name
		content := "content of " + name
		if _, err := e.call(a, "write", map[string]any{"path": path, "content": content}); err != nil {
			t.Fatalf("write %q: %v", name, err)
		}
		if _, err := e.call(a, "patch", map[string]any{"path": path, "old": "content", "new": "body"}); err != nil {
			t.Fatalf("patch %q: %v", name, err)
		}
		res, err := e.call(a, "read", map[string]any{"path": path})
		if err != nil || out(res, "content") != "body of "+name {
			t.Fatalf("read %q: %v %v", name, err, res)
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, "agents", a, "workspace", "pwned")); err == nil {
		t.Fatal("a file name was run as a command")
	}

	// Traversal resolves inside the container's view, and policy sees the normalised path.
	res, err = e.call(a, "read", map[string]any{"path": "../../etc/passwd"})
	if err != nil || !strings.Contains(out(res, "content").(string), "agent:x:1000") {
		t.Fatalf("traversal read: %v %+v", err, res)
	}
	got := e.entries(audit.Filter{Agent: a, Tool: "read"})
	if len(got) == 0 {
		t.Fatal("no audit entry for read")
	}

	// A symlink in the workspace pointing at / reaches the container's root, never the host's.
	if _, err := e.call(a, "exec", map[string]any{"argv": []string{"ln", "-s", "/", "root-link"}}); err != nil {
		t.Fatal(err)
	}
	hostMarker := filepath.Join("/", "toolgate-host-marker-"+filepath.Base(e.home))
	if err := os.WriteFile(hostMarker, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(hostMarker)
	if _, err := e.call(a, "read", map[string]any{"path": "root-link/" + filepath.Base(hostMarker)}); err == nil {
		t.Fatal("read through a symlink reached a host file")
	}
	if _, err := e.call(a, "write", map[string]any{"path": "root-link/etc/evil", "content": "x"}); err == nil {
		t.Fatal("write through a symlink into the read-only root succeeded")
	}

	// Invalid UTF-8 is refused with a clear error, binary goes through base64.
	bin := []byte{0xff, 0xfe, 0, 1, 2}
	if _, err := e.call(a, "write", map[string]any{"path": "bin.dat", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call(a, "read", map[string]any{"path": "bin.dat"}); err == nil || !strings.Contains(err.Error(), "base64") {
		t.Fatalf("binary read without base64: %v", err)
	}

	// A write over the limit is refused before it reaches the sandbox; the old file stays.
	big := strings.Repeat("x", 50<<20)
	_, err = e.call(a, "write", map[string]any{"path": "odd/with space.txt", "content": big})
	var we *api.Error
	if !errors.As(err, &we) || we.Code != "bad_request" {
		t.Fatalf("50 MiB write: %v", err)
	}
	if res, _ := e.call(a, "read", map[string]any{"path": "odd/with space.txt"}); out(res, "content") != "body of with space.txt" {
		t.Fatal("refused write changed the file")
	}

	// 100 MiB of output is capped with a visible marker; the call still ends normally.
	res, err = e.call(a, "exec", map[string]any{"command": "head -c 104857600 /dev/zero | tr '\\0' x; echo done >&2"})
	if err != nil {
		t.Fatal(err)
	}
	if s := out(res, "stdout").(string); len(s) > 70<<10 || !strings.Contains(s, "output truncated") {
		t.Fatalf("100 MiB output: %d bytes, marker missing", len(s))
	}

	// A command that never ends is killed at its timeout, with the process tree.
	res, err = e.call(a, "exec", map[string]any{"command": "sleep 1000 & sleep 1000", "timeout": "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if to, _ := out(res, "timedOut").(bool); !to {
		t.Fatalf("endless command: %+v", res.Output)
	}
	res, _ = e.call(a, "exec", map[string]any{"command": "ps -o comm | grep -c sleep || true"})
	if strings.TrimSpace(out(res, "stdout").(string)) != "0" {
		t.Fatalf("sleep processes survived the timeout: %v", out(res, "stdout"))
	}

	// Denied by a rule: recorded once, nothing ran.
	_, err = e.call(a, "exec", map[string]any{"command": "rm -rf /workspace"})
	if !errors.As(err, &we) || we.Code != "denied" || we.Rule != "no-rm-rf" {
		t.Fatalf("rule denial: %v", err)
	}
	if got := e.entries(audit.Filter{ID: we.ID}); len(got) != 1 || got[0].Decision != "deny" {
		t.Fatalf("denied call has %d entries", len(got))
	}
	if _, err := os.Stat(filepath.Join(e.home, "agents", a, "workspace", "odd")); err != nil {
		t.Fatal("denied rm -rf ran")
	}
	e.verify()
}

func TestAdminAPIRefusals(t *testing.T) {
	e := newEnv(t, "api")
	a := e.agents[0]
	cases := []struct {
		name, path, token, body string
		status                  int
		code                    string
	}{
		{"no token", "/v1/agents/" + a + "/tools/exec/call", "", `{"command":"true"}`, 401, "unauthorized"},
		{"wrong token", "/v1/agents/" + a + "/tools/exec/call", "tg_wrong", `{"command":"true"}`, 401, "unauthorized"},
		{"malformed JSON", "/v1/agents/" + a + "/tools/exec/call", e.token, `{"command":`, 400, "bad_request"},
		{"unknown agent", "/v1/agents/nobody/tools/exec/call", e.token, `{"command":"true"}`, 404, "not_found"},
		{"unknown tool", "/v1/agents/" + a + "/tools/teleport/call", e.token, `{}`, 404, "not_found"},
		{"unknown field", "/v1/agents/" + a + "/tools/read/call", e.token, `{"path":"x","evil":1}`, 400, "bad_request"},
	}
	for _, c := range cases {
		status, body := e.raw("POST", c.path, c.token, c.body)
		errBody, _ := body["error"].(map[string]any)
		if status != c.status || errBody["code"] != c.code {
			t.Errorf("%s: got %d %v, want %d %s", c.name, status, body, c.status, c.code)
			continue
		}
		// Every refused call is on record with its id (token refusals are checked below).
		if id, _ := errBody["id"].(string); c.status != 401 {
			if got := e.entries(audit.Filter{ID: id}); id == "" || len(got) != 1 || got[0].Decision != "deny" {
				t.Errorf("%s: refusal not audited (id %q, %d entries)", c.name, id, len(got))
			}
		}
	}
	// A refused token is audited as an attempt with no agent.
	if got := e.entries(audit.Filter{Type: string(gateway.KindAdmin)}); len(got) != 2 || got[0].Agent != "" || got[0].Rule != "auth.token" {
		t.Fatalf("admin refusals in audit: %+v", got)
	}
	// A body over the limit gets a clear 413.
	status, body := e.raw("POST", "/v1/agents/"+a+"/tools/write/call", e.token, strings.Repeat(" ", adminapi.DefaultMaxBody+1))
	if status != 413 {
		t.Fatalf("oversized body: %d %v", status, body)
	}
	e.verify()
}

func TestConcurrentCallsAcrossAgents(t *testing.T) {
	e := newEnv(t, "c1", "c2", "c3", "c4")
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := e.agents[i%len(e.agents)]
			res, err := e.call(a, "exec", map[string]any{"argv": []string{"echo", fmt.Sprint(i)}})
			if err == nil && out(res, "stdout") != fmt.Sprint(i)+"\n" {
				err = fmt.Errorf("call %d got %v", i, out(res, "stdout"))
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
	if got := e.entries(audit.Filter{Type: "core_tool"}); len(got) != 2*n {
		t.Fatalf("%d audit entries for %d calls", len(got), n)
	}
	e.verify()
}

func TestSandboxKilledMidCall(t *testing.T) {
	e := newEnv(t, "kill")
	a := e.agents[0]
	if _, err := e.call(a, "exec", map[string]any{"argv": []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.call(a, "exec", map[string]any{"argv": []string{"sleep", "30"}})
		done <- err
	}()
	time.Sleep(time.Second) // let the exec start
	if out, err := exec.Command("docker", "kill", e.containerID(a)).CombinedOutput(); err != nil {
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
	res, err := e.call(a, "exec", map[string]any{"argv": []string{"echo", "back"}})
	if err != nil || out(res, "stdout") != "back\n" {
		t.Fatalf("after the kill: %v %+v", err, res)
	}
	e.verify()
}

func TestRestartReattachesAndReloadKeepsCallsInFlight(t *testing.T) {
	e := newEnv(t, "restart")
	a := e.agents[0]
	if _, err := e.call(a, "write", map[string]any{"path": "keep.txt", "content": "kept"}); err != nil {
		t.Fatal(err)
	}
	before, err := e.c.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.start()
	after, err := e.c.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if before[0].Container == "" || before[0].Container != after[0].Container || after[0].State != "running" {
		t.Fatalf("restart did not re-attach: %+v → %+v", before, after)
	}
	res, err := e.call(a, "read", map[string]any{"path": "keep.txt"})
	if err != nil || out(res, "content") != "kept" {
		t.Fatalf("workspace after restart: %v", err)
	}

	// A reload while a call runs: the call finishes, the new rule applies to the next.
	slow := make(chan error, 1)
	go func() {
		res, err := e.call(a, "exec", map[string]any{"command": "sleep 2; echo finished"})
		if err == nil && out(res, "stdout") != "finished\n" {
			err = fmt.Errorf("in-flight call got %v", out(res, "stdout"))
		}
		slow <- err
	}()
	time.Sleep(500 * time.Millisecond)
	e.writeConfig("      - name: no-cat\n        deny: 'tool == \"exec\" && \"cat\" in argv'\n        reason: no cat\n")
	if err := e.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	_, err = e.call(a, "exec", map[string]any{"argv": []string{"cat", "keep.txt"}})
	var we *api.Error
	if !errors.As(err, &we) || we.Rule != "no-cat" {
		t.Fatalf("reloaded rule not applied: %v", err)
	}
	// An agent taken out of the config loses its sandbox and its calls.
	removed := testenv.Prefix() + "gone"
	e.agents = append(e.agents, removed)
	e.writeConfig("")
	if err := e.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	goneID := e.containerID(removed)
	e.agents = e.agents[:len(e.agents)-1]
	e.writeConfig("")
	if err := e.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "inspect", goneID).CombinedOutput(); err == nil {
		t.Fatalf("the removed agent's container is still there: %s", out[:min(len(out), 200)])
	}
	if _, err := e.call(removed, "exec", map[string]any{"argv": []string{"true"}}); err == nil {
		t.Fatal("a removed agent's call ran")
	}
	// An invalid config is refused and the running one stays.
	if err := os.WriteFile(e.cfg, []byte("agents: [oops"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Reload(context.Background()); err == nil {
		t.Fatal("invalid config reloaded")
	}
	if _, err := e.call(a, "exec", map[string]any{"argv": []string{"true"}}); err != nil {
		t.Fatalf("after a refused reload: %v", err)
	}
	e.verify()
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
	_, err := Start(context.Background(), Options{Home: home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Docker Engine") {
		t.Fatalf("want a clear Docker error, got %v", err)
	}
}

// TestCLI runs the real toolgate binary against the daemon: exit codes pass
// through, denials exit 126.
func TestCLI(t *testing.T) {
	e := newEnv(t, "cli")
	a := e.agents[0]
	run := e.cli
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
	e := newEnv(t, "plug")
	a := e.agents[0]
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
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := e.call(a, "echo", map[string]any{"argv": []string{"hello", "$(id)", "a;b"}})
	if err != nil || *res.ExitCode != 0 {
		t.Fatalf("echo: %v %+v", err, res)
	}
	if got := fmt.Sprint(out(res, "stdout")); got != "hello $(id) a;b\n" {
		t.Fatalf("echo printed %q", got)
	}
	// git runs on the host in the agent's workspace: it is not a repository.
	res, err = e.call(a, "git", map[string]any{"argv": []string{"status"}})
	if err != nil || *res.ExitCode == 0 || !strings.Contains(fmt.Sprint(out(res, "stderr")), "not a git repository") {
		t.Fatalf("git status: %v %+v", err, res)
	}
	var we *api.Error
	_, err = e.call(a, "git", map[string]any{"argv": []string{"push", "--force"}})
	if !errors.As(err, &we) || we.Rule != "no-force-push" {
		t.Fatalf("force push: %v", err)
	}
	_, err = e.call(a, "gh", map[string]any{"argv": []string{"pr", "list"}})
	if !errors.As(err, &we) || we.Rule != "tools.allowlist" {
		t.Fatalf("gh outside the allowlist: %v", err)
	}
	_, err = e.call(a, "git", map[string]any{"argv": []string{"status"}, "cwd": "/etc"})
	if !errors.As(err, &we) || we.Code != "bad_request" {
		t.Fatalf("cwd outside the workspace: %v", err)
	}
	if got := e.entries(audit.Filter{Agent: a, Type: "tool"}); len(got) < 6 {
		t.Fatalf("plugin calls in audit: %d", len(got))
	}
	e.verify()
}

// TestShutdownRecordsResultsOfCallsInFlight: a call still running when the
// daemon shuts down (the agent sockets are closed, not drained) gets its
// result entry before the audit log closes.
func TestShutdownRecordsResultsOfCallsInFlight(t *testing.T) {
	e := newEnv(t, "inflight")
	a := e.agents[0]
	call := &gateway.Call{Agent: a, Tool: "exec", Args: json.RawMessage(`{"command":"sleep 1"}`), Via: "socket"}
	done := make(chan error, 1)
	go func() {
		_, err := e.d.Gateway().Handle(context.Background(), call, nil)
		done <- err
	}()
	dir := filepath.Join(e.home, "logs")
	var id string // the call's decision is on disk: it is running
	for id == "" {
		time.Sleep(20 * time.Millisecond)
		_ = audit.Query(dir, audit.Filter{Agent: a, Tool: "exec"}, func(en *gateway.Entry) error { id = en.ID; return nil })
	}
	if err := e.d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.d = nil
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

// serveProcess stops the in-process daemon (if one runs) and runs the
// home's gateway as a person does, `toolgate serve` in a process of its own
// (killed at the end of the test); it returns the process and a client once
// the admin API answers. The sandboxes stay up across the switch.
func (e *env) serveProcess() (*exec.Cmd, *adminclient.Client) {
	e.t.Helper()
	if e.d != nil {
		if err := e.d.Shutdown(context.Background()); err != nil {
			e.t.Fatal(err)
		}
		e.d = nil
	}
	toolgate, _ := testenv.Binaries(e.t)
	cmd := exec.Command(toolgate, "--home", e.home, "serve")
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		c, err := adminclient.Dial(e.home)
		if err == nil {
			if _, err = c.Agents(context.Background()); err == nil {
				return cmd, c
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the daemon process did not come up: %v", err)
		}
	}
}
