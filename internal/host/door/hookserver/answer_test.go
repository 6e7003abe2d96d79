package hookserver

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto"
)

// What the gate sends is what the in-sandbox hook client reads: every field
// of proto.GateAnswer survives the trip, whatever else the gate adds.
func TestGateAnswerIsTheProtocols(t *testing.T) {
	for _, sent := range []GateAnswer{
		{Decision: gateway.Decision{Allow: true, Rule: "rules[1]", Reason: "ok"}, ID: "c-1"},
		{Decision: gateway.Decision{Rule: "tools.allowlist", Reason: "no", Shadow: &gateway.Shadow{Verdict: "allow"}}, ID: "c-2"},
		{Decision: gateway.Decision{Ask: true, Rule: "rules[0]"}},
	} {
		b, err := json.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		var got proto.GateAnswer
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		want := proto.GateAnswer{Allow: sent.Allow, Rule: sent.Rule, Reason: sent.Reason, Ask: sent.Ask, ID: sent.ID}
		if got != want {
			t.Errorf("%s read as %+v, want %+v", b, got, want)
		}
	}
}
