package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/adminclient"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/modeldoor"
	"github.com/toolgate/toolgate/internal/modeldoor/fakeprovider"
)

// TestMetricsEndpoint: /metrics on the admin socket counts a call made
// through the pipeline, its phases, the sandbox and the audit writer.
func TestMetricsEndpoint(t *testing.T) {
	e := newEnv(t, "metrics")
	agent := e.agents[0]
	if _, err := e.call(agent, "exec", map[string]any{"command": "true"}); err != nil {
		t.Fatal(err)
	}
	_, _ = e.call(agent, "exec", map[string]any{"command": "rm -rf /tmp/x"}) // denied by the env's rule
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(e.home, adminclient.SocketName))
	}}}
	resp, err := hc.Get("http://toolgate/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := string(b)
	for _, want := range []string{
		`toolgate_calls_total{agent="` + agent + `",decision="allow",kind="core_tool",tool="exec"} 1`,
		`toolgate_calls_total{agent="` + agent + `",decision="deny",kind="core_tool",tool="exec"} 1`,
		`toolgate_call_phase_seconds_count{kind="core_tool",phase="audit"} 2`,
		`toolgate_sandboxes{state="running"} 1`,
		`toolgate_sandbox_calls_waiting{agent="` + agent + `"} 0`,
		`toolgate_audit_syncs_total`,
		`toolgate_audit_index_lag_seconds`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in /metrics:\n%s", want, grep(out, "toolgate_"))
		}
	}
}

func grep(s, sub string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// Model calls count under their provider, the tool a model call names,
// not under "unknown": the provider is in the configuration.
func TestMetricsModelCalls(t *testing.T) {
	fake := fakeprovider.New(t)
	dir := t.TempDir()
	cfg, err := config.Parse(dir, "c.yaml", []byte(`gateway:
  models:
    anthropic: {api: anthropic, url: "`+fake.URL+`", private: allow}
agents:
  demo:
    model: {providers: [anthropic]}
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	aw, err := audit.Open(filepath.Join(dir, "logs"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close()
	var gw *gateway.Gateway
	m := metrics.New(metrics.Sources{Known: func(agent, tool string) (bool, bool) { return known(gw.Snapshot(), agent, tool) }})
	gw = gateway.New(gateway.Options{Audit: aw, Observer: m}, b.Snapshot)
	resp, err := modeldoor.New(gw).Send(context.Background(), &modeldoor.Request{Agent: "demo", Provider: "anthropic", Path: "/v1/messages",
		Body: []byte(`{"model":"fake-text","max_tokens":5}`)})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `toolgate_calls_total{agent="demo",decision="allow",kind="model",tool="anthropic"} 1`; !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("no %s in /metrics:\n%s", want, grep(rec.Body.String(), "toolgate_calls"))
	}
}
