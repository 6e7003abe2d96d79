// Package sockettest sets up a real gateway for tests of the agent socket
// and what talks to it: the built-in echo plugin, a real audit writer, an
// allowlist decider and an agent socket server.
package sockettest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/plugin"
	"github.com/toolgate/toolgate/internal/proto"
)

// Env is a running gateway with its agent socket server.
type Env struct {
	GW       *gateway.Gateway
	Audit    *audit.Writer
	AuditDir string
	Server   *agentsock.Server
	Dir      string
}

// Allowlist is the decider: agent → tools it may call.
type Allowlist map[string][]string

func (a Allowlist) Decide(call *gateway.Call) gateway.Decision {
	if slices.Contains(a[call.Agent], call.Tool) {
		return gateway.Decision{Allow: true, Rule: "tools.allowlist", Reason: "allowed"}
	}
	return gateway.Decision{Rule: "tools.allowlist", Reason: call.Tool + " is not among the agent's tools"}
}

// New starts a gateway whose agents are allow's keys, with the built-in
// echo plugin and the extra tools. Everything is closed when t ends.
func New(t testing.TB, allow Allowlist, extra ...gateway.Tool) *Env {
	t.Helper()
	dir := t.TempDir()
	tools, err := plugin.Build(&config.Config{Plugins: map[string]config.Plugin{"echo": {Kind: "builtin", Builtin: "toolgate-echo"}}}, plugin.Env{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range extra {
		tools[x.Name()] = x
	}
	snap := &gateway.Snapshot{Agents: map[string]gateway.AgentInfo{}, Tools: tools, Decider: allow}
	for a := range allow {
		snap.Agents[a] = gateway.AgentInfo{Name: a, Workspace: proto.WorkspacePath, HostDir: filepath.Join(dir, a, "workspace")}
	}
	e := &Env{Dir: dir, AuditDir: filepath.Join(dir, "audit")}
	if e.Audit, err = audit.Open(e.AuditDir, audit.Options{}); err != nil {
		t.Fatal(err)
	}
	e.GW = gateway.New(gateway.Options{Audit: e.Audit}, snap)
	e.Server = agentsock.New(e.GW, agentsock.Options{})
	t.Cleanup(func() {
		e.Server.Close()
		// As the daemon does: calls still in flight (a tunnel closing)
		// write their result entries before the log closes.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.GW.Wait(ctx)
		e.Audit.Close()
	})
	return e
}

// UseHostWorkspaces makes each agent's workspace, as calls see it, its
// host directory (created), so launchers run on the host pass the cwd check.
func (e *Env) UseHostWorkspaces(t testing.TB) {
	t.Helper()
	old := e.GW.Snapshot()
	snap := *old
	snap.Agents = map[string]gateway.AgentInfo{}
	for name, a := range old.Agents {
		if err := os.MkdirAll(a.HostDir, 0o755); err != nil {
			t.Fatal(err)
		}
		a.Workspace = a.HostDir
		snap.Agents[name] = a
	}
	e.GW.Swap(&snap)
}

// SocketPath is where agent's socket lives in this environment.
func (e *Env) SocketPath(agent string) string {
	return filepath.Join(e.Dir, agent, "sock", proto.SocketName)
}

// Serve opens the sockets of the given agents (owned by the current user).
func (e *Env) Serve(t testing.TB, agents ...string) {
	t.Helper()
	for _, a := range agents {
		if err := e.Server.Serve(a, e.SocketPath(a), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// Entries returns every audit entry so far.
func (e *Env) Entries(t testing.TB) []*gateway.Entry {
	t.Helper()
	var out []*gateway.Entry
	if err := audit.Query(e.AuditDir, audit.Filter{}, func(en *gateway.Entry) error {
		out = append(out, en)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Func is a plugin-kind tool run by a Go function, for tests that need a
// handler to block, fail or watch its context.
type Func struct {
	ToolName string
	Fn       func(ctx context.Context, call *gateway.Call, io *gateway.Streams) (*gateway.Result, error)
}

func (f *Func) Name() string       { return f.ToolName }
func (f *Func) Kind() gateway.Kind { return gateway.KindTool }

func (f *Func) Prepare(call *gateway.Call, _ gateway.AgentInfo) error {
	var a struct {
		Argv []string `json:"argv"`
	}
	if err := json.Unmarshal(call.Args, &a); err != nil {
		return err
	}
	call.Argv = a.Argv
	return nil
}

func (f *Func) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	return f.Fn(ctx, call, env.IO)
}
