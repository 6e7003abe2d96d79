package gatewaytest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/gateway/gatewaytest"
)

// words is a tool written for the example: it counts the words of a file
// in the agent's sandbox. Prepare validates the arguments and fills the
// fact policy reads (Path); Run touches only the sandbox it is given, which
// a tool of kind core is.
type words struct{}

func (words) Name() string       { return "words" }
func (words) Kind() gateway.Kind { return gateway.KindCore }

func (words) Prepare(call *gateway.Call, _ gateway.AgentInfo) error {
	var a struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(call.Args, &a); err != nil || !path.IsAbs(a.Path) {
		return errors.New("words: path must be absolute")
	}
	call.Path = path.Clean(a.Path)
	return nil
}

func (words) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	f, err := env.Sandbox.ReadFile(ctx, call.Path, 1<<20)
	if err != nil {
		return nil, err
	}
	return &gateway.Result{Output: fmt.Sprint(len(bytes.Fields(f.Data)))}, nil
}

// Writing a tool: implement gateway.Tool, then drive it through the real
// pipeline on the kit's parts — a policy that keeps it in /workspace, a
// sandbox in memory, an audit sink in memory. A denied call never runs,
// and both are on the record.
func Example_writingATool() {
	gw := gatewaytest.New(gatewaytest.Options{
		Tools: []gateway.Tool{words{}},
		Decider: gatewaytest.Decide(func(c *gateway.Call) gateway.Decision {
			if strings.HasPrefix(c.Path, "/workspace/") {
				return gateway.Decision{Allow: true, Rule: "workspace"}
			}
			return gateway.Decision{Rule: "workspace", Reason: "only files in /workspace"}
		}),
	})
	_ = gw.Sandbox.WriteFile(context.Background(), "/workspace/notes.txt", []byte("three small words"))
	for _, p := range []string{"/workspace/notes.txt", "/etc/shadow"} {
		res, err := gw.Handle(context.Background(), &gateway.Call{Agent: "demo", Tool: "words", Args: json.RawMessage(`{"path":"` + p + `"}`)}, nil)
		var denied *gateway.DeniedError
		switch {
		case errors.As(err, &denied):
			fmt.Println(p, "denied:", denied.Decision.Reason)
		case err != nil:
			fmt.Println(p, "error:", err)
		default:
			fmt.Println(p, "has", res.Output, "words")
		}
	}
	for _, e := range gw.Sink.Entries() {
		fmt.Println(e.Phase, e.Tool, e.Decision)
	}
	// Output:
	// /workspace/notes.txt has 3 words
	// /etc/shadow denied: only files in /workspace
	// decision words allow
	// result words allow
	// decision words deny
}
