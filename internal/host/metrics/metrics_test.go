package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

func scrapeText(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestObserveCall(t *testing.T) {
	m := New(Sources{
		Known: func(agent string, kind gateway.Kind, tool string) (bool, bool) {
			return agent == "demo", tool == "exec" || tool == "egress" || kind == gateway.KindModel && tool == "anthropic"
		},
		Models: func() []string { return []string{"claude-sonnet-4*", "claude-x"} },
		Sandboxes: func(context.Context) (map[string]int, map[string]int) {
			return map[string]int{"running": 1}, map[string]int{"demo": 3}
		},
		Audit:       func() (uint64, uint64) { return 10, 4 },
		IndexLag:    func() time.Duration { return 0 },
		PostgresLag: func() time.Duration { return -time.Second },
	})
	m.ObserveCall(gateway.CallStats{Agent: "demo", Kind: gateway.KindCore, Tool: "exec", Decision: "allow",
		Decide: 20 * time.Microsecond, Record: time.Millisecond, Execute: 3 * time.Millisecond})
	m.ObserveCall(gateway.CallStats{Agent: "demo", Kind: gateway.KindCore, Tool: "exec", Decision: "deny", Decide: time.Microsecond, Record: time.Millisecond})
	// Names a request made up never become labels.
	for i := range 50 {
		m.ObserveCall(gateway.CallStats{Agent: strings.Repeat("x", i+1), Kind: gateway.KindAdmin, Tool: "GET /" + strings.Repeat("y", i), Decision: "deny"})
	}
	m.ObserveCall(gateway.CallStats{Agent: "demo", Kind: gateway.KindEgress, Tool: "egress", Decision: "allow",
		Detail: map[string]any{"bytesUp": int64(100), "bytesDown": int64(5000)}})
	m.ObserveCall(gateway.CallStats{Agent: "demo", Kind: gateway.KindModel, Tool: "anthropic", Decision: "allow",
		Detail: map[string]any{"model": "claude-x", "inputTokens": 12, "outputTokens": int64(7), "costUSD": 0.25}})
	out := scrapeText(t, m)
	for _, want := range []string{
		`toolgate_calls_total{agent="demo",decision="allow",kind="core_tool",tool="exec"} 1`,
		`toolgate_calls_total{agent="demo",decision="deny",kind="core_tool",tool="exec"} 1`,
		`toolgate_calls_total{agent="unknown",decision="deny",kind="admin",tool="unknown"} 50`,
		`toolgate_call_phase_seconds_count{kind="core_tool",phase="execute"} 1`,
		`toolgate_egress_bytes_total{agent="demo",direction="down"} 5000`,
		`toolgate_model_tokens_total{agent="demo",model="claude-x",type="input"} 12`,
		`toolgate_model_cost_usd_total{agent="demo",model="claude-x"} 0.25`,
		`toolgate_calls_total{agent="demo",decision="allow",kind="model",tool="anthropic"} 1`,
		`toolgate_sandboxes{state="running"} 1`,
		`toolgate_sandbox_calls_waiting{agent="demo"} 3`,
		`toolgate_audit_entries_total 10`,
		`toolgate_audit_index_lag_seconds 0`,
		`toolgate_audit_postgres_lag_seconds -1`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
}

// A model name is the agent's (request) or the provider's (answer) to
// choose: only configured names and patterns become labels.
func TestModelLabel(t *testing.T) {
	configured := []string{"claude-*", "claude-sonnet-4*", "gpt-4o", "other-model"}
	for _, c := range []struct{ name, want string }{
		{"gpt-4o", "gpt-4o"},
		{"other-model", "other-model"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4*"}, // the most specific pattern
		{"claude-haiku", "claude-*"},
		{"claude-*", "claude-*"},
		{"gpt-4o-mini", "other"},
		{"GPT-4O", "other"},
		{"", "other"},
		{strings.Repeat("x", 100000), "other"},
		{"evil\"} 1\ntoolgate_calls_total{x=\"", "other"},
		{"claude-\n\x00\xff", "claude-*"}, // a configured pattern, whatever the bytes it matched
	} {
		if got := modelLabel(configured, c.name); got != c.want {
			t.Errorf("modelLabel(%.40q) = %q, want %q", c.name, got, c.want)
		}
	}
	if got := modelLabel(nil, "gpt-4o"); got != "other" {
		t.Errorf("no configured models: %q", got)
	}
}

// FuzzModelLabel: whatever name a request or an answer carries, its label
// is one the configuration wrote, or "other".
func FuzzModelLabel(f *testing.F) {
	for _, s := range []string{"gpt-4o", "claude-sonnet-4-5", "", "claude-[", "a/b", "\xff\x00"} {
		f.Add(s)
	}
	configured := []string{"claude-*", "claude-sonnet-4*", "gpt-4o", "[a-z]?-x", "bad["}
	f.Fuzz(func(t *testing.T, name string) {
		got := modelLabel(configured, name)
		if got != "other" && !slices.Contains(configured, got) {
			t.Fatalf("modelLabel(%q) = %q: not configured", name, got)
		}
	})
}
