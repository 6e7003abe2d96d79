package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestHostLoopbackEgress: a service on the host's loopback that the egress
// allowlist names is reached from the sandbox by a client that honours
// NO_PROXY (curl), through the gateway — not looked for on the sandbox's
// own loopback — while the sandbox's own loopback services stay its own.
func TestHostLoopbackEgress(t *testing.T) {
	image := testenv.AgentImage(t, "claude-code") // has curl and python3
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host service %s", r.URL.Path)
	}))
	defer host.Close()
	hu, _ := url.Parse(host.URL)
	e := New(t, "loopback")
	a := e.Agents[0]
	e.WriteConfig(fmt.Sprintf("    image: %s\n    egress:\n      private: allow\n      allow: [\"localhost:%s\"]\n", image, hu.Port()))
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := e.Call(a, "exec", map[string]any{"argv": []string{"curl", "-sS", "--max-time", "20", "http://localhost:" + hu.Port() + "/x"}})
	if err != nil || *res.ExitCode != 0 || Out(res, "stdout") != "host service /x" {
		t.Fatalf("host loopback service: %v %+v", err, res)
	}
	execID := e.Entries(audit.Filter{Agent: a, Tool: "exec"})[0].ID
	eg := e.Entries(audit.Filter{Agent: a, Type: "egress"})
	if len(eg) == 0 || eg[0].Parent != execID || eg[0].Detail["host"] != "localhost" {
		t.Fatalf("egress entries %+v, want one for localhost with parent %s", eg, execID)
	}
	// A server the agent starts in its sandbox is its own, proxy or not.
	res, err = e.Call(a, "exec", map[string]any{"command": "python3 -m http.server 8099 --bind 127.0.0.1 >/dev/null 2>&1 & " +
		"for i in $(seq 50); do curl -fsS --max-time 5 http://127.0.0.1:8099/ && break; sleep 0.2; done; kill $!"})
	if err != nil || *res.ExitCode != 0 || !strings.Contains(fmt.Sprint(Out(res, "stdout")), "Directory listing") {
		t.Fatalf("the sandbox's own service: %v %+v", err, res)
	}
}
