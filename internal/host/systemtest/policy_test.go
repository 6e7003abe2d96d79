package systemtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// TestAskAPerson: a rule with ask: holds the call until a person answers
// over the admin API; approve runs it, deny and silence refuse it, a
// shutdown while it waits refuses it; each outcome, who answered and when,
// is on the record, and the chain verifies.
func TestAskAPerson(t *testing.T) {
	e := New(t, "ask")
	agent := e.Agents[0]
	e.WriteConfig(`      - name: ask-touch
        ask: 'commands.exists(c, c.name == "touch")'
        reason: creating files needs a person
    askTimeout: 3s
`)
	if _, err := e.Daemon.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *gateway.Result
		err error
	}
	start := func(cmd string) (<-chan outcome, string) {
		ch := make(chan outcome, 1)
		go func() {
			res, err := e.Call(agent, "exec", map[string]any{"command": cmd})
			ch <- outcome{res, err}
		}()
		for range 300 {
			ps, err := e.Admin.Approvals(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if p.Command == cmd {
					return ch, p.ID
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%q never waited for approval", cmd)
		return nil, ""
	}
	denied := func(o outcome, want string) {
		t.Helper()
		var we *api.Error
		if !errors.As(o.err, &we) || we.Code != "denied" || we.Rule != "ask-touch" || !strings.Contains(we.Message, want) {
			t.Errorf("want a denial by ask-touch saying %q, got %v", want, o.err)
		}
	}

	ch, id := start("touch approved.txt")
	if err := e.Admin.Answer(t.Context(), id, api.ApprovalAnswer{Approve: true, Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	if o := <-ch; o.err != nil || o.res.ExitCode == nil || *o.res.ExitCode != 0 {
		t.Fatalf("approved call: %+v %v", o.res, o.err)
	}
	if res, err := e.Call(agent, "exec", map[string]any{"command": "ls approved.txt"}); err != nil || *res.ExitCode != 0 {
		t.Fatalf("the approved call did not run: %v", err)
	}

	ch, id = start("touch denied.txt")
	if err := e.Admin.Answer(t.Context(), id, api.ApprovalAnswer{Reason: "not now"}); err != nil {
		t.Fatal(err)
	}
	denied(<-ch, "not now")

	ch, _ = start("touch silent.txt")
	denied(<-ch, "no one answered within 3s")

	if err := e.Admin.Answer(t.Context(), "nosuch", api.ApprovalAnswer{Approve: true}); err == nil {
		t.Error("an answer for no waiting call accepted")
	}

	ch, _ = start("touch shutdown.txt")
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Daemon = nil
	if o := <-ch; o.err == nil {
		t.Error("the waiting call ran through a shutdown")
	}

	// On the record: an ask entry before each final decision, the answer
	// in the decision's detail; nothing ran but the approved call.
	var log []*gateway.Entry
	if err := audit.Query(e.Home+"/logs", audit.Filter{Agent: agent}, func(en *gateway.Entry) error {
		log = append(log, en)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]string{}
	asks := 0
	for _, en := range log {
		if en.Phase == gateway.PhaseAsk {
			asks++
			continue
		}
		if en.Phase != gateway.PhaseDecision || en.Rule != "ask-touch" {
			continue
		}
		ap, _ := en.Detail["approval"].(map[string]any)
		outcomes[en.Decision+"/"+str(ap["outcome"])] = str(ap["by"])
	}
	if asks != 4 {
		t.Errorf("%d ask entries, want 4", asks)
	}
	for _, want := range []string{"allow/approved", "deny/denied", "deny/timeout", "deny/shutdown"} {
		if _, ok := outcomes[want]; !ok {
			t.Errorf("no decision %s on record (have %v)", want, outcomes)
		}
	}
	if !strings.HasPrefix(outcomes["allow/approved"], "admin token ") {
		t.Errorf("approver recorded as %q", outcomes["allow/approved"])
	}
	rep, err := audit.Verify(e.Home + "/logs")
	if err != nil || !rep.OK() {
		t.Fatalf("audit verify: %v %v", err, rep.Bad)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestRateLimitSurvivesReload: calls over an agent's rate are denied on the
// record with the limit as reason, and a reload does not reset the count.
func TestRateLimitSurvivesReload(t *testing.T) {
	e := New(t, "rate")
	agent := e.Agents[0]
	e.WriteConfig("    rates: [{tool: exec, perMinute: 2}]\n")
	if _, err := e.Daemon.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := e.Call(agent, "exec", map[string]any{"command": "true"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	over := func() {
		t.Helper()
		_, err := e.Call(agent, "exec", map[string]any{"command": "true"})
		var we *api.Error
		if !errors.As(err, &we) || we.Code != "denied" || we.Rule != "rate.exec" || !strings.Contains(we.Message, "over 2 exec calls per minute") {
			t.Fatalf("over the rate: %v", err)
		}
	}
	over()
	if _, err := e.Daemon.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	over()
	if res, err := e.Call(agent, "read", map[string]any{"path": "."}); err != nil && res == nil {
		var we *api.Error
		if errors.As(err, &we) && we.Rule == "rate.exec" {
			t.Errorf("a read was counted against the exec rate")
		}
	}
	if n := len(e.Entries(audit.Filter{Agent: agent, Decision: "deny"})); n != 2 {
		t.Errorf("%d denials on record, want 2", n)
	}
}
