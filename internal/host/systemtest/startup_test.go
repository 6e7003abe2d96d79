package systemtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

// engineGate is a proxy in front of the real Docker Engine that holds
// every container create until it is opened: the daemon's sandboxes stay
// starting for as long as a test needs. DOCKER_HOST points at it.
type engineGate struct {
	open chan struct{}
	once sync.Once
}

func newEngineGate(t *testing.T) *engineGate {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	target := strings.TrimPrefix(cli.DaemonHost(), "unix://")
	cli.Close()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := &engineGate{open: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", target)
		}},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/containers/create") {
			select {
			case <-g.open:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { g.release(); srv.Close() })
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	return g
}

func (g *engineGate) release() { g.once.Do(func() { close(g.open) }) }

// dashboardRow is the agent's row of the dashboard's agents page, read
// over the admin socket with the admin token.
func dashboardRow(t *testing.T, e *Env, agent string) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(e.Home, api.SocketName))
	}}}
	req, _ := http.NewRequest("GET", "http://toolgate/ui/", nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("dashboard: %d %v", resp.StatusCode, err)
	}
	for _, row := range strings.Split(string(page), "<tr>") {
		if strings.Contains(row, ">"+agent+"</a>") {
			return row
		}
	}
	t.Fatalf("agent %s not on the dashboard:\n%s", agent, page)
	return ""
}

func agentRow(t *testing.T, c *adminclient.Client, agent string) api.AgentStatus {
	t.Helper()
	rows, err := c.Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Agent == agent {
			return r
		}
	}
	t.Fatalf("agent %s not in %+v", agent, rows)
	return api.AgentStatus{}
}

// TestAdminAnswersWhileSandboxesStart: the admin API answers before the
// sandboxes are up, showing them starting; a call to a starting agent is
// decided and recorded, waits for its sandbox, and runs once it is up.
func TestAdminAnswersWhileSandboxesStart(t *testing.T) {
	gate := newEngineGate(t)
	e := NewHome(t, Extra{}, "slow")
	a := e.Agents[0]
	e.Launch()
	if r := agentRow(t, e.Admin, a); r.State != "starting" || r.Container != "" {
		t.Fatalf("status while starting: %+v", r)
	}
	if row := dashboardRow(t, e, a); !strings.Contains(row, "<td>starting") {
		t.Fatalf("dashboard while starting: %s", row)
	}
	type answer struct {
		res *gateway.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := e.Call(a, "exec", map[string]any{"argv": []string{"echo", "hi"}})
		done <- answer{res, err}
	}()
	// Its decision is on record: the call is past the policy, waiting.
	for found := false; !found; time.Sleep(20 * time.Millisecond) {
		_ = audit.Query(filepath.Join(e.Home, "logs"), audit.Filter{Agent: a, Tool: "exec"}, func(*gateway.Entry) error {
			found = true
			return nil
		})
	}
	time.Sleep(100 * time.Millisecond) // time to return early, were it wrong
	select {
	case got := <-done:
		t.Fatalf("the call returned while its sandbox was starting: %+v %v", got.res, got.err)
	default:
	}
	gate.release()
	got := <-done
	if got.err != nil || *got.res.ExitCode != 0 || Out(got.res, "stdout") != "hi\n" {
		t.Fatalf("call once the sandbox is up: %+v %v", got.res, got.err)
	}
	<-e.Daemon.SandboxesUp()
	if r := agentRow(t, e.Admin, a); r.State != "running" || r.Container == "" {
		t.Fatalf("status once up: %+v", r)
	}
	e.Verify()
}

// TestSandboxFailureShownOthersWork: an agent whose sandbox cannot start
// (its image does not exist) is failed in the status with the reason; its
// calls are refused with sandbox_unavailable, on the record; the other
// agent's sandbox comes up and works.
func TestSandboxFailureShownOthersWork(t *testing.T) {
	e := NewHome(t, Extra{}, "fine", "broken")
	good, bad := e.Agents[0], e.Agents[1]
	_, clientBin := testenv.Binaries(t)
	cfg := fmt.Sprintf("gateway:\n  clientBinary: %s\nagents:\n  %s: {}\n  %s: {image: toolgate-test/no-such-image:%d}\n", clientBin, good, bad, os.Getpid())
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Start()
	r := agentRow(t, e.Admin, bad)
	if r.State != "failed" || r.Error == "" || r.Container != "" {
		t.Fatalf("status of the broken agent: %+v", r)
	}
	if row := dashboardRow(t, e, bad); !strings.Contains(row, "<td>failed") || !strings.Contains(row, `class="deny"`) {
		t.Fatalf("dashboard row of the broken agent: %s", row)
	}
	_, err := e.Call(bad, "exec", map[string]any{"argv": []string{"true"}})
	var we *api.Error
	if !errors.As(err, &we) || we.Code != "sandbox_unavailable" {
		t.Fatalf("call to the broken agent: %v", err)
	}
	res, err := e.Call(good, "exec", map[string]any{"argv": []string{"echo", "fine"}})
	if err != nil || Out(res, "stdout") != "fine\n" {
		t.Fatalf("call to the good agent: %+v %v", res, err)
	}
	if r := agentRow(t, e.Admin, good); r.State != "running" {
		t.Fatalf("status of the good agent: %+v", r)
	}
	es := e.Entries(audit.Filter{Agent: bad})
	if len(es) != 2 || es[0].Decision != "allow" || es[1].Phase != gateway.PhaseResult || es[1].Error == "" {
		t.Fatalf("the broken agent's call on record: %+v", es)
	}
	e.Verify()
}
