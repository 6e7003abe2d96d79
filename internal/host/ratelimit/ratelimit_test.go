package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func limiter(rates ...config.Rate) (*Limiter, *clock) {
	c := &clock{t: time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)}
	l := New()
	l.now = c.now
	l.Configure(&config.Config{Agents: map[string]*config.Agent{"a": {Rates: rates}}})
	return l, c
}

func exec() *gateway.Call { return &gateway.Call{Agent: "a", Tool: "exec", Kind: gateway.KindCore} }

func TestPerMinute(t *testing.T) {
	t.Parallel()
	l, c := limiter(config.Rate{Tool: "exec", PerMinute: 3})
	for i := range 3 {
		if done, d := l.Admit(exec()); d != nil {
			t.Fatalf("call %d denied: %+v", i, d)
		} else {
			done()
		}
	}
	_, d := l.Admit(exec())
	if d == nil || d.Rule != "rate.exec" || !strings.Contains(d.Reason, "over 3 exec calls per minute") {
		t.Fatalf("4th call: %+v", d)
	}
	// Other tools and agents are not counted.
	if _, d := l.Admit(&gateway.Call{Agent: "a", Tool: "read", Kind: gateway.KindCore}); d != nil {
		t.Errorf("read denied: %+v", d)
	}
	if _, d := l.Admit(&gateway.Call{Agent: "b", Tool: "exec"}); d != nil {
		t.Errorf("agent b denied: %+v", d)
	}
	c.t = c.t.Add(20 * time.Second) // one token back
	if _, d := l.Admit(exec()); d != nil {
		t.Errorf("after 20s: %+v", d)
	}
	if _, d := l.Admit(exec()); d == nil {
		t.Error("second call after 20s admitted")
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	l, _ := limiter(config.Rate{Kind: "core_tool", Concurrent: 2})
	d1, _ := l.Admit(exec())
	_, _ = l.Admit(exec())
	if _, d := l.Admit(exec()); d == nil || !strings.Contains(d.Reason, "2 core_tool calls already running") {
		t.Fatalf("third concurrent call: %+v", d)
	}
	d1()
	if _, d := l.Admit(exec()); d != nil {
		t.Errorf("after one ended: %+v", d)
	}
}

func TestEgressBytesPerDay(t *testing.T) {
	t.Parallel()
	l, c := limiter(config.Rate{Kind: "egress", BytesPerDay: 1000})
	call := &gateway.Call{Agent: "a", Tool: "egress", Kind: gateway.KindEgress}
	done, d := l.Admit(call)
	if d != nil {
		t.Fatal(d)
	}
	call.Detail = map[string]any{"bytesUp": int64(300), "bytesDown": int64(800)} // as the tunnel records
	done()
	if _, d := l.Admit(&gateway.Call{Agent: "a", Tool: "egress", Kind: gateway.KindEgress}); d == nil || !strings.Contains(d.Reason, "1100 bytes") {
		t.Fatalf("over budget: %+v", d)
	}
	c.t = c.t.Add(2 * time.Hour) // past midnight UTC
	if _, d := l.Admit(&gateway.Call{Agent: "a", Tool: "egress", Kind: gateway.KindEgress}); d != nil {
		t.Errorf("a new day: %+v", d)
	}
}

// TestReloadKeepsCounters: a new configuration with the same selector keeps
// what was used; a selector taken out stops limiting.
func TestReloadKeepsCounters(t *testing.T) {
	t.Parallel()
	l, _ := limiter(config.Rate{Tool: "exec", PerMinute: 2})
	l.Admit(exec())
	l.Admit(exec())
	l.Configure(&config.Config{Agents: map[string]*config.Agent{"a": {Rates: []config.Rate{{Tool: "exec", PerMinute: 2}}}}})
	if _, d := l.Admit(exec()); d == nil {
		t.Error("a reload reset the per-minute budget")
	}
	l.Configure(&config.Config{Agents: map[string]*config.Agent{"a": {}}})
	if _, d := l.Admit(exec()); d != nil {
		t.Errorf("limit removed, still denied: %+v", d)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ rates, want string }{
		{`[{tool: exec, kind: core_tool, perMinute: 1}]`, "not both"},
		{`[{kind: nope, perMinute: 1}]`, "kinds are"},
		{`[{tool: exec}]`, "needs perMinute"},
		{`[{tool: exec, bytesPerDay: 1g}]`, "kind: egress"},
		{`[{kind: egress, perMinute: -1}]`, "positive"},
	} {
		_, err := config.Parse("/tg", "c.yaml", []byte("agents:\n  a:\n    rates: "+tc.rates+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.rates, err, tc.want)
		}
	}
	if _, err := config.Parse("/tg", "c.yaml", []byte("agents:\n  a:\n    rates: [{kind: egress, bytesPerDay: 1g, concurrent: 4}]\n")); err != nil {
		t.Errorf("valid rates refused: %v", err)
	}
}
