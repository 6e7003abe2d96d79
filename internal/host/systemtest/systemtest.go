// Package systemtest runs the whole gateway as `toolgate serve` does — a
// home with a config and an admin token, the daemon started on it, real
// sandboxes in Docker — and holds the tests that need all of it: the
// doors end to end, reloads, restarts, floods, the dashboard in Chromium,
// Claude Code, Codex and pi in a sandbox, the fleet copy in Postgres, and
// the goal benchmarks (scripts/bench.sh).
//
// Env is the harness: New gives a running gateway with its agents, Call
// and CLI make calls, Entries and Verify read the audit log.
package systemtest

import (
	"context"
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
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/daemon"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

// Env is a toolgate home with a running daemon.
type Env struct {
	T          testing.TB
	Home       string
	ConfigPath string         // HOME/config.yaml
	Daemon     *daemon.Daemon // nil while none runs in the test's process
	Admin      *adminclient.Client
	Token      string   // an admin token, also in HOME's token file
	Agents     []string // the agents' names, with the process's prefix (testenv.Prefix)
	// Extra is YAML added to the config: gateway keys (indented) then
	// top-level sections, before agents.
	Extra Extra
}

// Extra adds to the test config.
type Extra struct {
	Gateway, Top, AgentKeys string
}

// ContainerID is the id of the agent's sandbox container, as the daemon
// reports it (the test does not depend on how containers are named).
func (e *Env) ContainerID(agent string) string {
	e.T.Helper()
	rows, err := e.Admin.Agents(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	for _, r := range rows {
		if r.Agent == agent && r.Container != "" {
			return r.Container
		}
	}
	e.T.Fatalf("no container for agent %s: %+v", agent, rows)
	return ""
}

// AgentYAML is one agent's config; %s is the agent name.
const AgentYAML = `  %s:
    limits: {maxWrite: 16m, maxOutput: 64k, execTimeout: 20s}
    rules:
      - name: no-rm-rf
        deny: 'tool == "exec" && command.contains("rm -rf")'
        reason: no recursive removal
`

// New is a home with the agents (AgentYAML each) and its daemon running,
// their sandboxes up.
func New(t testing.TB, agents ...string) *Env {
	t.Helper()
	return NewWith(t, Extra{}, agents...)
}

// NewWith is New with extra in the config.
func NewWith(t testing.TB, extra Extra, agents ...string) *Env {
	t.Helper()
	e := NewHome(t, extra, agents...)
	e.Start()
	return e
}

// NewHome is a home with a config and an admin token, its daemon not
// started yet (stopped at the end of the test when it is).
func NewHome(t testing.TB, extra Extra, agents ...string) *Env {
	t.Helper()
	testenv.NeedDocker(t)
	home := t.TempDir()
	e := &Env{T: t, Home: home, ConfigPath: filepath.Join(home, "config.yaml"), Extra: extra}
	for _, a := range agents {
		e.Agents = append(e.Agents, testenv.Prefix()+a)
	}
	e.WriteConfig("")
	store, err := auth.OpenStore(filepath.Join(home, auth.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	e.Token, _, err = store.Create(auth.ScopeAdmin, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, api.TokenFile), []byte(e.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if e.Daemon != nil {
			_ = e.Daemon.Shutdown(context.Background())
		}
	})
	return e
}

// WriteSecrets writes the gateway's host secrets file (secrets.yaml).
func (e *Env) WriteSecrets(yaml string) {
	e.T.Helper()
	if err := os.WriteFile(filepath.Join(e.Home, "secrets.yaml"), []byte(yaml), 0o600); err != nil {
		e.T.Fatal(err)
	}
}

// WriteConfig writes the config: the client binary, Extra, and each agent
// with extraRules and Extra.AgentKeys after its rules.
func (e *Env) WriteConfig(extraRules string) {
	_, clientBin := testenv.Binaries(e.T)
	var b strings.Builder
	fmt.Fprintf(&b, "gateway:\n  clientBinary: %s\n%s%sagents:\n", clientBin, e.Extra.Gateway, e.Extra.Top)
	for _, a := range e.Agents {
		fmt.Fprintf(&b, AgentYAML, a)
		b.WriteString(extraRules)
		b.WriteString(e.Extra.AgentKeys)
	}
	if err := os.WriteFile(e.ConfigPath, []byte(b.String()), 0o600); err != nil {
		e.T.Fatal(err)
	}
}

// Config is the configuration in HOME, read as the daemon reads it.
func (e *Env) Config() *config.Config {
	e.T.Helper()
	cfg, err := config.Load(e.Home, e.ConfigPath)
	if err != nil {
		e.T.Fatal(err)
	}
	return cfg
}

// Start starts the daemon and waits for its sandboxes.
func (e *Env) Start() {
	e.T.Helper()
	e.Launch()
	<-e.Daemon.SandboxesUp() // the tests want their sandboxes running
}

// Launch starts the daemon as `toolgate serve` does, in the test's
// process, without waiting for its sandboxes.
func (e *Env) Launch() {
	e.T.Helper()
	d, err := daemon.Start(context.Background(), daemon.Options{Home: e.Home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		e.T.Fatal(err)
	}
	e.Daemon = d
	if e.Admin, err = adminclient.Dial(e.Home); err != nil {
		e.T.Fatal(err)
	}
}

// CLI runs the toolgate command on e's home with stdin; it returns the
// command's output (stdout and stderr) and exit status.
func (e *Env) CLI(stdin string, args ...string) (string, int) {
	e.T.Helper()
	toolgate, _ := testenv.Binaries(e.T)
	cmd := exec.Command(toolgate, args...)
	cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
	cmd.Stdin = strings.NewReader(stdin)
	outb, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(outb), ee.ExitCode()
	} else if err != nil {
		e.T.Fatal(err)
	}
	return string(outb), 0
}

// Call calls an agent's tool through the admin API.
func (e *Env) Call(agent, tool string, args any) (*gateway.Result, error) {
	return e.Admin.Call(context.Background(), agent, tool, args, nil, nil)
}

// Raw sends an admin API request with the given token and body.
func (e *Env) Raw(method, path, token, body string) (int, map[string]any) {
	e.T.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(e.Home, api.SocketName))
	}}}
	req, _ := http.NewRequest(method, "http://toolgate"+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// Entries are the audit entries f matches, with every call answered so far
// on disk.
func (e *Env) Entries(f audit.Filter) []*gateway.Entry {
	if err := e.Daemon.FlushAudit(); err != nil { // result entries are written behind the answer
		e.T.Fatal(err)
	}
	var out []*gateway.Entry
	if err := audit.Query(filepath.Join(e.Home, "logs"), f, func(en *gateway.Entry) error {
		out = append(out, en)
		return nil
	}); err != nil {
		e.T.Fatal(err)
	}
	return out
}

// Verify fails the test when the audit log's chain does not verify.
func (e *Env) Verify() {
	e.T.Helper()
	if err := e.Daemon.FlushAudit(); err != nil {
		e.T.Fatal(err)
	}
	rep, err := audit.Verify(filepath.Join(e.Home, "logs"))
	if err != nil || !rep.OK() {
		e.T.Fatalf("audit verify: %v %v", err, rep.Bad)
	}
}

// Out is a key of a tool's output.
func Out(res *gateway.Result, key string) any {
	m, _ := res.Output.(map[string]any)
	return m[key]
}

// ServeProcess stops the in-process daemon (if one runs) and runs the
// home's gateway as a person does, `toolgate serve` in a process of its own
// (killed at the end of the test); it returns the process and a client once
// the admin API answers. The sandboxes stay up across the switch. flags
// are serve's (--rm).
func (e *Env) ServeProcess(flags ...string) (*exec.Cmd, *adminclient.Client) {
	e.T.Helper()
	if e.Daemon != nil {
		if err := e.Daemon.Shutdown(context.Background()); err != nil {
			e.T.Fatal(err)
		}
		e.Daemon = nil
	}
	toolgate, _ := testenv.Binaries(e.T)
	cmd := exec.Command(toolgate, append([]string{"--home", e.Home, "serve"}, flags...)...)
	if err := cmd.Start(); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		c, err := adminclient.Dial(e.Home)
		if err == nil {
			if _, err = c.Agents(context.Background()); err == nil {
				return cmd, c
			}
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("the daemon process did not come up: %v", err)
		}
	}
}
