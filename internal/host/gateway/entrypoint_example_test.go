package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// clock is a tool for the example: it answers the time of day it was given.
type clock struct{}

func (clock) Name() string                                   { return "clock" }
func (clock) Kind() gateway.Kind                             { return gateway.KindTool }
func (clock) Prepare(*gateway.Call, gateway.AgentInfo) error { return nil }
func (clock) Run(_ context.Context, call *gateway.Call, _ *gateway.RunEnv) (*gateway.Result, error) {
	var a struct{ Zone string }
	if err := json.Unmarshal(call.Args, &a); err != nil {
		return nil, err
	}
	return &gateway.Result{Output: "noon in " + a.Zone}, nil
}

// onlyUTC is a policy for the example: the clock may only be asked for UTC.
type onlyUTC struct{}

func (onlyUTC) Decide(call *gateway.Call) gateway.Decision {
	if string(call.Args) == `{"zone":"UTC"}` {
		return gateway.Decision{Allow: true, Rule: "utc"}
	}
	return gateway.Decision{Rule: "utc", Reason: "UTC only"}
}

// An entry point turns what its transport received into a Call, with the
// agent its transport identified (a socket, a token; never the request
// body), and hands it to Handle: decided, recorded, run, recorded. It
// executes nothing itself, and a denial comes back as a DeniedError to
// answer with.
func ExampleGateway_Handle() {
	gw := gateway.New(gateway.Options{Audit: &printSink{}}, &gateway.Snapshot{
		Agents:  map[string]gateway.AgentInfo{"demo": {Name: "demo"}},
		Tools:   map[string]gateway.Tool{"clock": clock{}},
		Decider: onlyUTC{},
	})
	for _, args := range []string{`{"zone":"UTC"}`, `{"zone":"Mars"}`} {
		call := &gateway.Call{Agent: "demo", Tool: "clock", Args: json.RawMessage(args), Via: "example"}
		res, err := gw.Handle(context.Background(), call, nil)
		var denied *gateway.DeniedError
		switch {
		case errors.As(err, &denied):
			fmt.Println("denied:", denied.Decision.Reason)
		case err != nil:
			fmt.Println("error:", err)
		default:
			fmt.Println("result:", res.Output)
		}
	}
	// Output:
	// decision tool agent=demo tool=clock decision=allow rule=utc
	// result tool agent=demo tool=clock decision=allow rule=utc
	// result: noon in UTC
	// decision tool agent=demo tool=clock decision=deny rule=utc
	// denied: UTC only
}
