package gateway_test

import (
	"errors"
	"fmt"
	"sync"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// printSink prints what would be appended to the audit log.
type printSink struct{ mu sync.Mutex }

func (s *printSink) Append(e *gateway.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Printf("%s %s agent=%s tool=%s decision=%s rule=%s\n", e.Phase, e.Type, e.Agent, e.Tool, e.Decision, e.Rule)
	return nil
}

func newExampleGateway() *gateway.Gateway {
	return gateway.New(gateway.Options{Audit: &printSink{}}, &gateway.Snapshot{
		Agents: map[string]gateway.AgentInfo{"demo": {Name: "demo"}},
	})
}

// A door that saw something it did not decide — here a model's answer
// relayed to an agent — records it with Observe. The verdict names what was
// observed; allow and deny are refused, so an observation never passes for
// a decision.
func ExampleGateway_Observe() {
	gw := newExampleGateway()
	id, err := gw.Observe(&gateway.Observation{
		Agent: "demo", Type: gateway.KindObserved, Tool: "messages", Via: "model",
		Verdict: "observed", Detail: map[string]any{"inputTokens": 812, "outputTokens": 97},
	})
	fmt.Println(id != "", err)
	_, err = gw.Observe(&gateway.Observation{Agent: "demo", Type: gateway.KindObserved, Verdict: "allow"})
	fmt.Println(err != nil)
	// Output:
	// result observed agent=demo tool=messages decision=observed rule=
	// true <nil>
	// true
}

// A door that refuses a request before it becomes a call (over a limit, a
// malformed header) has the gateway record it and answers with the error
// Refuse returns; over HTTP, wire.Refused writes that answer. The source
// (here the agent whose socket carried the request) is what floods are
// counted against.
func ExampleGateway_Refuse() {
	gw := newExampleGateway()
	call := &gateway.Call{Agent: "demo", Kind: gateway.KindTool, Tool: "messages", Via: "model"}
	err := gw.Refuse("demo", call, gateway.Decision{Rule: "model.budget", Reason: "daily budget spent"})
	var denied *gateway.DeniedError
	if errors.As(err, &denied) { // recorded: answer with the decision and denied.ID
		fmt.Println(denied.Decision.Rule, denied.ID == call.ID)
	}
	fmt.Println(gw.Stats("demo").Denials.Load())
	// Output:
	// decision tool agent=demo tool=messages decision=deny rule=model.budget
	// model.budget true
	// 1
}
