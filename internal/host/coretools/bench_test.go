package coretools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// The tools' own cost (decode, validate, window, encode) over the fake
// sandbox's local files; the Docker path is measured by the integration suite.

func benchCall(b *testing.B, h *harness, tool, args string) {
	t := h.tools[tool]
	env := &gateway.RunEnv{Agent: testAgent, Sandbox: h.sb}
	b.ReportAllocs()
	for b.Loop() {
		call := &gateway.Call{Agent: testAgent.Name, Args: json.RawMessage(args)}
		if err := t.Prepare(call, testAgent); err != nil {
			b.Fatal(err)
		}
		if _, err := t.Run(context.Background(), call, env); err != nil {
			b.Fatal(err)
		}
	}
}

var mib = strings.Repeat(strings.Repeat("x", 63)+"\n", 1<<14)

func BenchmarkRead1MiB(b *testing.B) {
	h := newHarness(b, config.Limits{})
	h.put("/workspace/f", mib)
	b.SetBytes(int64(len(mib)))
	benchCall(b, h, "read", `{"path":"f"}`)
}

func BenchmarkWrite1MiB(b *testing.B) {
	h := newHarness(b, config.Limits{})
	b.SetBytes(int64(len(mib)))
	benchCall(b, h, "write", jsonArgs(b, map[string]string{"path": "f", "content": mib}))
}

func BenchmarkPatchDiff1MiB(b *testing.B) {
	h := newHarness(b, config.Limits{})
	h.put("/workspace/f", mib)
	// a diff that changes nothing, so every iteration applies to the same file
	line := mib[:64]
	benchCall(b, h, "patch", jsonArgs(b, map[string]string{"path": "f", "diff": "@@ -8000,2 +8000,2 @@\n-" + line + "+" + line + " " + line}))
}
