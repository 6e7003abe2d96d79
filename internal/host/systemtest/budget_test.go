package systemtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/session"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestTaskBudgetInSandbox: `toolgate run --budget cost=0.05` runs a script
// in a real sandbox that sends eight model requests at once through the
// model door to a priced provider on loopback. Each holds what it could
// cost while it runs, so the cap admits only as many as it has room for —
// overshooting by at most one — and the rest wait for a person: one
// denied (the agent's client gets a 403 shaped like the provider's error),
// one approved with a raised cap (--raise), the others approved; every
// request the run sent is on record under the run's session.
func TestTaskBudgetInSandbox(t *testing.T) {
	image := testenv.AgentImage(t, "claude-code") // curl
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(400 * time.Millisecond) // the requests overlap
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"m","type":"message","role":"assistant","model":"fake-budget","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}`)
	}))
	defer upstream.Close()
	e := NewHome(t, Extra{
		Gateway: fmt.Sprintf("  models:\n    anthropic:\n      {api: anthropic, url: %q, secret: key, private: allow, prices: {\"fake-*\": {input: 3, output: 15}}}\n", upstream.URL),
	}, "budget")
	a := e.Agents[0]
	e.WriteConfig(fmt.Sprintf("    image: %s\n    askTimeout: 60s\n    model: {providers: [anthropic]}\n", image))
	e.WriteSecrets(fmt.Sprintf("secrets:\n  key: {value: sk-test, agents: [%q], tools: [anthropic]}\n", a))
	e.Start()

	body := `{"model":"fake-budget","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	if _, err := e.Call(a, "write", map[string]any{"path": "/workspace/req.json", "content": body}); err != nil {
		t.Fatal(err)
	}
	hold := (float64(len(body)+3)/4*3 + 1000*15) / 1e6
	admitted := 0
	for held := 0.0; held < 0.05; held += hold {
		admitted++
	}
	script := `for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null -w "%{http_code}\n" --max-time 90 -H "content-type: application/json" ` +
		`-H "x-api-key: $ANTHROPIC_API_KEY" -H "anthropic-version: 2023-06-01" --data-binary @/workspace/req.json "$ANTHROPIC_BASE_URL/v1/messages" & done; wait`
	type ran struct {
		out  string
		code int
	}
	done := make(chan ran, 1)
	go func() {
		out, code := e.CLI("", "run", a, "--session", "task-1", "--budget", "cost=0.05", "--", "sh", "-c", script)
		done <- ran{out, code}
	}()
	var pending []api.Pending
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ps, err := e.Admin.Approvals(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if pending = ps; len(ps) == 8-admitted {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the run ended with %d calls waiting: %d\n%s", len(ps), r.code, r.out)
		default:
		}
	}
	if len(pending) != 8-admitted {
		t.Fatalf("%d model requests wait for a person, want %d (%d fit under $0.05 holding $%.4f each)", len(pending), 8-admitted, admitted, hold)
	}
	for _, p := range pending {
		if p.Rule != session.RuleBudgetCost || p.Session != "task-1" || p.Kind != gateway.KindModel {
			t.Fatalf("waiting: %+v", p)
		}
	}
	if out, code := e.CLI("", "approvals", "deny", pending[0].ID, "--reason", "enough"); code != 0 {
		t.Fatalf("deny: %s", out)
	}
	if out, code := e.CLI("", "approvals", "approve", pending[1].ID, "--raise", "cost=1"); code != 0 {
		t.Fatalf("approve --raise: %s", out)
	}
	for _, p := range pending[2:] {
		if out, code := e.CLI("", "approvals", "approve", p.ID); code != 0 {
			t.Fatalf("approve: %s", out)
		}
	}
	r := <-done
	codes := strings.Fields(r.out)
	slices.Sort(codes)
	want := append([]string{"200", "200", "200", "200", "200", "200", "200"}, "403")
	if r.code != 0 || !slices.Equal(codes, want) {
		t.Fatalf("the run: %d, answers %v, want %v\n%s", r.code, codes, want, r.out)
	}
	var model, raised int
	for _, en := range e.Entries(audit.Filter{Agent: a, Type: string(gateway.KindModel)}) {
		if en.Phase != gateway.PhaseDecision {
			continue
		}
		model++
		if en.Session != "task-1" {
			t.Errorf("a model call of the run is not under its session: %+v", en)
		}
		if ap, ok := en.Detail["approval"].(map[string]any); ok && ap["raise"] == "cost=1" {
			raised++
		}
	}
	if model != 8 || raised != 1 {
		t.Errorf("%d model decisions on record (want 8), %d with the raise (want 1)", model, raised)
	}
	e.Verify()
}
