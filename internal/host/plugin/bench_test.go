package plugin

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// benchRun measures Prepare + Run of one tool, the handler's share of a
// plugin call (the socket and the pipeline's audit are measured elsewhere).
func benchRun(b *testing.B, p config.Plugin, args string) {
	tools, err := Build(&config.Config{Plugins: map[string]config.Plugin{"t": p}}, Env{})
	if err != nil {
		b.Fatal(err)
	}
	tool := tools["t"]
	agent := gateway.AgentInfo{Name: "demo", Workspace: "/workspace", HostDir: b.TempDir()}
	env := &gateway.RunEnv{Agent: agent, IO: &gateway.Streams{Stdout: io.Discard, Stderr: io.Discard}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		call := &gateway.Call{Agent: "demo", Tool: "t", Args: json.RawMessage(args)}
		if err := tool.Prepare(call, agent); err != nil {
			b.Fatal(err)
		}
		res, err := tool.Run(ctx, call, env)
		if err != nil || *res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

func BenchmarkBuiltinEcho(b *testing.B) {
	benchRun(b, config.Plugin{Kind: "builtin", Builtin: "toolgate-echo"}, `{"argv":["hello","world"],"cwd":"/workspace"}`)
}

func BenchmarkCommandTrue(b *testing.B) {
	benchRun(b, config.Plugin{Kind: "command", Command: "/bin/true", Cwd: "workspace"}, `{"argv":["x"],"cwd":"/workspace"}`)
}
