package egress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/coretools"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/egress"
	"github.com/toolgate/toolgate/internal/host/door/egress/dnstest"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/netrule"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A real sandbox (network none) reaches an allowed host only through the
// forwarder and the gateway; a denied host and the metadata address get
// the proxy's 403; every attempt is an egress entry whose parent is the
// exec call that ran wget.
func TestDockerSandboxEgress(t *testing.T) {
	testenv.NeedDocker(t)
	_, clientBin := testenv.Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from outside %s", r.URL.Path)
	}))
	defer web.Close()
	wu, _ := url.Parse(web.URL)
	dns := dnstest.New(t, answers(map[string][]netip.Addr{"allowed.test": {loop}, "denied.test": {loop}}))

	dir := t.TempDir()
	agent := testenv.Prefix() + "egress"
	t.Cleanup(func() { _ = testenv.RemoveSandboxes(testenv.Prefix()) })
	workspace := filepath.Join(dir, agent, "workspace")
	cfg, err := config.Parse(dir, "c.yaml", []byte(fmt.Sprintf(`gateway:
  egress: {resolver: %q}
agents:
  %s:
    workspace: %s
    egress:
      allow: ["allowed.test:%s", "169.254.169.254:80"]
      private: allow
`, dns.Addr(), agent, workspace, wu.Port())))
	if err != nil {
		t.Fatal(err)
	}
	b, err := assemble.Build(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Snapshot.ByKind = map[gateway.Kind]gateway.Tool{gateway.KindEgress: assemble.EgressTool(cfg)}

	m, err := docker.New(ctx, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.BuildDefaultImage(ctx, proto.DefaultImage, false); err != nil {
		t.Fatal(err)
	}
	specs := b.Specs(clientBin)
	for i := range specs {
		specs[i].Egress = cfg.Agents[specs[i].Agent].Egress != nil
	}
	if err := m.SetSpecs(specs); err != nil {
		t.Fatal(err)
	}
	aw, err := audit.Open(filepath.Join(dir, "logs"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close()
	gw := gateway.New(gateway.Options{Audit: aw, Sandboxes: m}, b.Snapshot)
	srv := agentsock.New(gw, agentsock.Options{})
	defer srv.Close()
	srv.Handle(egress.Pattern, egress.NewHandler(gw))
	uid, gid, _ := sandbox.ParseUser(specs[0].UserOrDefault())
	if err := srv.Serve(agent, filepath.Join(specs[0].SocketDir(), proto.SocketName), uid, gid); err != nil {
		t.Fatal(err)
	}

	exec := func(argv ...string) (string, *coretools.ExecOutput) {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"argv": argv, "timeout": 30})
		call := &gateway.Call{Agent: agent, Tool: "exec", Args: args, Via: "test"}
		res, err := gw.Handle(ctx, call, nil)
		if err != nil {
			t.Fatal(err)
		}
		return call.ID, res.Output.(*coretools.ExecOutput)
	}

	// The environment an exec's processes see.
	_, out := exec("sh", "-c", "echo $http_proxy $HTTPS_PROXY $NO_PROXY")
	if !strings.Contains(out.Stdout, "@127.0.0.1:3128") || !strings.Contains(out.Stdout, "localhost,127.0.0.1") {
		t.Fatalf("proxy env: %+v", out)
	}

	allowed := fmt.Sprintf("http://allowed.test:%s/simple/", wu.Port())
	okID, out := exec("wget", "-q", "-O", "-", allowed)
	if out.ExitCode != 0 || out.Stdout != "hello from outside /simple/" {
		t.Fatalf("allowed: %+v", out)
	}
	deniedID, out := exec("wget", "-q", "-O", "-", fmt.Sprintf("http://denied.test:%s/", wu.Port()))
	if out.ExitCode == 0 || !strings.Contains(out.Stderr, "403") {
		t.Fatalf("denied: %+v", out)
	}
	metaID, out := exec("wget", "-q", "-O", "-", "http://169.254.169.254/latest/meta-data/")
	if out.ExitCode == 0 || !strings.Contains(out.Stderr, "403") {
		t.Fatalf("metadata: %+v", out)
	}
	// Without the proxy there is no network at all.
	_, out = exec("sh", "-c", "unset http_proxy HTTP_PROXY; wget -q -T 5 -O - "+allowed)
	if out.ExitCode == 0 {
		t.Fatalf("reached the outside without the proxy: %+v", out)
	}

	var entries []*gateway.Entry
	if err := audit.Query(filepath.Join(dir, "logs"), audit.Filter{}, func(e *gateway.Entry) error {
		if e.Type == gateway.KindEgress {
			entries = append(entries, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	byParent := map[string][]*gateway.Entry{}
	for _, e := range entries {
		if e.Agent != agent {
			t.Errorf("entry of agent %q", e.Agent)
		}
		byParent[e.Parent] = append(byParent[e.Parent], e)
	}
	if ok := byParent[okID]; len(ok) != 2 || ok[0].Decision != "allow" || ok[1].Phase != gateway.PhaseResult ||
		ok[1].Detail["remote"] != "127.0.0.1:"+wu.Port() || ok[1].Detail["bytesDown"] == float64(0) {
		t.Errorf("allowed entries %+v", ok)
	}
	if d := byParent[deniedID]; len(d) != 1 || d[0].Decision != "deny" || d[0].Rule != netrule.RuleAllowlist {
		t.Errorf("denied entries %+v", d)
	}
	if d := byParent[metaID]; len(d) != 1 || d[0].Decision != "deny" || d[0].Rule != netrule.RuleMetadata {
		t.Errorf("metadata entries %+v", d)
	}
	if len(entries) != 4 {
		t.Errorf("%d egress entries, want 4", len(entries))
	}
}
