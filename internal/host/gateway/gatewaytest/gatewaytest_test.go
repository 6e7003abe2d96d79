package gatewaytest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// The kit's parts hold the gateway to its promises: with the sink failing
// nothing runs and the call is refused as unrecorded; with it back, the
// call runs and both its entries are kept; the policy sees the facts the
// tool's Prepare filled.
func TestKit(t *testing.T) {
	tool := &Tool{Output: "done"}
	var seen []string
	gw := New(Options{Tools: []gateway.Tool{tool}, Decider: Decide(func(c *gateway.Call) gateway.Decision {
		seen = c.Argv
		return gateway.Decision{Allow: true, Rule: "test"}
	})})
	call := func() (*gateway.Result, error) {
		return gw.Handle(context.Background(), &gateway.Call{Agent: "demo", Tool: "fake", Args: json.RawMessage(`{"argv":["a","b"]}`)}, nil)
	}
	gw.Sink.Fail(errors.New("disk full"))
	if _, err := call(); !errors.Is(err, gateway.ErrAuditUnavailable) || tool.Runs() != 0 {
		t.Fatalf("with the sink failing: %v, %d runs", err, tool.Runs())
	}
	gw.Sink.Fail(nil)
	res, err := call()
	if err != nil || res.Output != "done" || tool.Runs() != 1 || len(seen) != 2 {
		t.Fatalf("%v %+v, %d runs, policy saw %q", err, res, tool.Runs(), seen)
	}
	if es := gw.Sink.Entries(); len(es) != 2 || es[0].Phase != gateway.PhaseDecision || es[1].Phase != gateway.PhaseResult || len(gw.Sink.Of(es[0].ID)) != 2 {
		t.Fatalf("entries %+v", es)
	}
	sb := gw.Sandbox
	if _, err := sb.ReadFile(context.Background(), "/x", 10); err == nil {
		t.Fatal("read a file never written")
	}
	_ = sb.WriteFile(context.Background(), "/x", []byte("hello"))
	if f, err := sb.ReadFile(context.Background(), "/x", 2); err != nil || string(f.Data) != "he" || f.Size != 5 {
		t.Fatalf("%+v %v", f, err)
	}
	if out, err := sb.Exec(context.Background(), &gateway.ExecSpec{Argv: []string{"echo", "hi"}}); err != nil || out.ExitCode != 0 || len(sb.Execs()) != 1 {
		t.Fatalf("%+v %v", out, err)
	}
}
