package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// TestPagesRenderHostileText: html/template escapes markup, not what
// reorders or hides text; no page, nor the live feed's events, gives the
// browser a bidirectional override, a control character or an invisible
// format character that an agent put in a call.
func TestPagesRenderHostileText(t *testing.T) {
	t.Parallel()
	const h = "ls \u202efdp.exe\u202c \u2066x\u2069 \x1b[2J\u009b\u200b\u3164"
	const session = "s\u202e1"
	dir := filepath.Join(t.TempDir(), "logs")
	w, err := audit.Open(dir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{"command": h})
	id := gateway.NewID()
	for _, e := range []*gateway.Entry{
		{ID: id, Phase: gateway.PhaseDecision, Agent: "a", Type: gateway.KindHook, Tool: "Bash" + h, Args: args, Decision: "deny",
			Rule: "rules[0]", Reason: "denied: " + h, Session: session},
		{ID: gateway.NewID(), Phase: gateway.PhaseDecision, Agent: "a", Type: gateway.KindTool, Tool: "echo", Args: args, Decision: "allow",
			Session: session, Parent: id},
	} {
		e.TS = time.Now()
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	x, err := auditindex.Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := x.CatchUp(); err != nil {
		t.Fatal(err)
	}
	store, err := auth.OpenStore(filepath.Join(t.TempDir(), "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, _ := store.Create(auth.ScopeViewer, "", 0)
	approvals := approval.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go approvals.Await(ctx, &gateway.Call{ID: "w1", Agent: "a", Kind: gateway.KindCore, Tool: "exec", Args: args, Command: h,
		Argv: []string{"sh", h}, Input: []byte(h + "\n")}, gateway.Decision{Ask: true, Rule: "ask", Reason: "r"}, time.Minute)
	for len(approvals.List()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	d := New(Options{Tokens: store, Index: x, Approvals: approvals, Poll: 10 * time.Millisecond,
		Agents: func(context.Context) ([]api.AgentStatus, error) {
			return []api.AgentStatus{{Agent: "a", State: "failed", Error: "exec: " + h}}, nil
		},
		Config: func() *config.Config { return &config.Config{} }})
	defer d.Close()
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	// get reads a page, or the live feed's stream until its events hold
	// both entries (the stream does not end).
	get := func(path string) string {
		rctx, stop := context.WithTimeout(ctx, time.Minute)
		defer stop()
		req, _ := http.NewRequestWithContext(rctx, "GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+viewer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for strings.Count(b.String(), "fdp.exe") < 2 || !strings.HasPrefix(path, "/ui/feed/events") {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return b.String()
	}
	for _, p := range []string{"/ui/", "/ui/feed", "/ui/denials", "/ui/session/" + session, "/ui/entry/" + id, "/ui/approvals", "/ui/feed/events?after=0"} {
		body := get(p)
		for i, r := range body {
			if textsafe.Unsafe(r) {
				t.Errorf("%s: %U at byte %d:\n%s", p, r, i, body)
				break
			}
		}
		if !strings.Contains(body, `\u202efdp.exe`) {
			t.Errorf("%s does not show the override as an escape:\n%s", p, body)
		}
	}
}
