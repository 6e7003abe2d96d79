package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/adminclient"
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
