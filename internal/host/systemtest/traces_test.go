package systemtest

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/tracing/tracingtest"
)

// TestTracesOverOTLP: with gateway.telemetry.otlp the daemon exports a
// trace of each call to a real OTLP/HTTP receiver; an exec whose process
// runs a plugin through its launcher in the sandbox has that plugin call
// beneath it, and the plugin's argument does not leave the host.
func TestTracesOverOTLP(t *testing.T) {
	col := tracingtest.New(t)
	e := NewWith(t, Extra{
		Gateway:   "  telemetry:\n    otlp: {endpoint: '" + col.URL + "'}\n",
		Top:       "plugins:\n  echo: {kind: builtin, builtin: toolgate-echo}\n",
		AgentKeys: "    tools: [echo]\n",
	}, "traces")
	a := e.Agents[0]
	const marker = "argument-that-stays-home"
	res, err := e.Call(a, "exec", map[string]any{"command": "/tools/bin/echo " + marker})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if err := e.Daemon.Shutdown(context.Background()); err != nil { // sends what is queued
		t.Fatal(err)
	}
	e.Daemon = nil

	tree := tracingtest.NewTree(col.Spans())
	var exec []string
	for id, s := range tree.ByCall {
		if tracingtest.Attr(s, "gen_ai.tool.name") != "exec" {
			continue
		}
		exec = append(exec, id)
		if hex.EncodeToString(s.TraceId) != id || len(s.ParentSpanId) != 0 || s.Name != "execute_tool exec" {
			t.Errorf("exec span: %q trace %x parent %x", s.Name, s.TraceId, s.ParentSpanId)
		}
		if got := strings.Join(tree.Phases(s), ","); got != "decide,audit write,execute" {
			t.Errorf("exec phases: %s", got)
		}
		calls := tree.Calls(s)
		if len(calls) != 1 || tracingtest.Attr(calls[0], "gen_ai.tool.name") != "echo" || !bytes.Equal(calls[0].TraceId, s.TraceId) {
			t.Fatalf("the launcher's plugin call is not beneath the exec: %v", calls)
		}
		if tracingtest.Attr(calls[0], "toolgate.via") != "socket" {
			t.Errorf("plugin call via %q", tracingtest.Attr(calls[0], "toolgate.via"))
		}
	}
	if len(exec) != 1 {
		t.Fatalf("%d exec spans among %d", len(exec), len(col.Spans()))
	}
	for _, b := range col.Raw() {
		if bytes.Contains(b, []byte(marker)) {
			t.Fatal("argument content left the host in a trace")
		}
	}
}
