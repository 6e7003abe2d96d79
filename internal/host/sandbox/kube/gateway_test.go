package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/coretools"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/agentsock/sockettest"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/plugin"
	_ "github.com/toolgate/toolgate/internal/host/plugin/kinds"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/proto"
)

// TestAgentsThroughTheGateway runs two agents' pods behind one real
// gateway (pipeline, audit log, agent sockets served in the pods'
// volumes): core tools and a plugin call work in a's pod; calls the
// policy does not allow are denied and recorded; b's pod has no way to
// a's gateway channel.
func TestAgentsThroughTheGateway(t *testing.T) {
	c := needCluster(t)
	m := c.manager(t, "gw")
	a := c.agent(t, m, "-a", func(s *sandbox.AgentSpec) { s.Tools = []string{"echo"} })
	b := c.agent(t, m, "-b")
	ctx := context.Background()

	tools, err := plugin.Build(&config.Config{Plugins: map[string]config.Plugin{"echo": {Kind: "builtin", Builtin: "toolgate-echo"}}}, plugin.Env{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range coretools.New(nil, nil) {
		tools[ct.Name()] = ct
	}
	allow := sockettest.Allowlist{a.Agent: {"echo", "exec", "read", "write", "patch"}, b.Agent: {"exec"}}
	snap := &gateway.Snapshot{Agents: map[string]gateway.AgentInfo{}, Tools: tools, Decider: allow}
	for _, s := range []sandbox.AgentSpec{a, b} {
		snap.Agents[s.Agent] = gateway.AgentInfo{Name: s.Agent, Workspace: proto.WorkspacePath}
	}
	auditDir := t.TempDir()
	w, err := audit.Open(auditDir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	gw := gateway.New(gateway.Options{Audit: w, Sandboxes: m}, snap)
	srv := agentsock.New(gw, agentsock.Options{})
	defer srv.Close()
	if err := m.SetSpecs([]sandbox.AgentSpec{a, b}); err != nil {
		t.Fatal(err)
	}
	socks := map[string]string{}
	for _, s := range []sandbox.AgentSpec{a, b} {
		sb, err := m.Sandbox(ctx, s.Agent)
		if err != nil {
			t.Fatal(err)
		}
		_, uid := sb.(*Sandbox).Pod()
		socks[s.Agent] = filepath.Join(m.VolumeDir(uid, VolSocket), proto.SocketName)
		listen, err := m.SocketPath(sb.(*Sandbox))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Serve(s.Agent, listen, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}

	call := func(agent, tool string, args any) (string, error) {
		raw, _ := json.Marshal(args)
		res, err := gw.Handle(ctx, &gateway.Call{Agent: agent, Tool: tool, Args: raw, Via: "test"}, nil)
		if err != nil {
			return "", err
		}
		out, _ := json.Marshal(res)
		return string(out), nil
	}
	steps := []struct {
		name, agent, tool string
		args              any
		want              string // in the result's JSON
		denied            bool
	}{
		{"write", a.Agent, "write", map[string]any{"path": "/workspace/n.txt", "content": "one two\n"}, `"bytes":8`, false},
		{"patch", a.Agent, "patch", map[string]any{"path": "/workspace/n.txt", "old": "two", "new": "three"}, `"replacements":1`, false},
		{"read", a.Agent, "read", map[string]any{"path": "/workspace/n.txt"}, `one three`, false},
		{"exec", a.Agent, "exec", map[string]any{"argv": []string{"cat", "n.txt"}}, `one three`, false},
		{"plugin call from the pod", a.Agent, "exec", map[string]any{"argv": []string{"/tools/bin/echo", "from", "the pod"}}, `from the pod`, false},
		{"b may not write", b.Agent, "write", map[string]any{"path": "/workspace/n.txt", "content": "x"}, "", true},
		{"b may not call echo", b.Agent, "exec", map[string]any{"argv": []string{"/tools/toolgate-client", "call", "echo", "x"}}, fmt.Sprintf(`"exitCode":%d`, proto.LaunchExitDenied), false},
		{"nothing of b's write", b.Agent, "exec", map[string]any{"argv": []string{"sh", "-c", "test -e /workspace/n.txt || echo absent"}}, `absent`, false},
		{"only b's own socket in b", b.Agent, "exec", map[string]any{"argv": []string{"ls", "/run/toolgate/sock"}}, `gateway.sock\n"`, false},
		{"a's channel not in b", b.Agent, "exec", map[string]any{"argv": []string{"sh", "-c", "test -e " + socks[a.Agent] + " || echo absent"}}, `absent`, false},
		{"a's socket path unreachable from b", b.Agent, "exec", map[string]any{"argv": []string{"env", "TOOLGATE_SOCKET=" + socks[a.Agent], "/tools/toolgate-client", "call", "echo"}}, fmt.Sprintf(`"exitCode":%d`, proto.LaunchExitUnavailable), false},
	}
	for _, st := range steps {
		got, err := call(st.agent, st.tool, st.args)
		var denied *gateway.DeniedError
		switch {
		case st.denied && !errors.As(err, &denied):
			t.Errorf("%s: got %v %s, want a denial", st.name, err, got)
		case !st.denied && (err != nil || !strings.Contains(got, st.want)):
			t.Errorf("%s: got %v %s, want ~%s", st.name, err, got, st.want)
		}
	}

	// The plugin call is recorded under a's name, identified by the
	// socket in a's pod, from the sandbox user; b's attempts as denials.
	var echoA, echoB bool
	err = audit.Query(auditDir, audit.Filter{}, func(e *gateway.Entry) error {
		if e.Tool == "echo" && e.Phase == gateway.PhaseDecision {
			p, _ := e.Detail["peer"].(map[string]any)
			echoA = echoA || (e.Agent == a.Agent && e.Decision == "allow" && p["uid"] == float64(1000))
			echoB = echoB || (e.Agent == b.Agent && e.Decision == "deny")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !echoA || !echoB {
		t.Errorf("audit: a's echo allowed %v, b's denied %v", echoA, echoB)
	}
	if rep, err := audit.Verify(auditDir); err != nil || !rep.OK() {
		t.Fatalf("audit chain: %v %+v", err, rep)
	}
}
