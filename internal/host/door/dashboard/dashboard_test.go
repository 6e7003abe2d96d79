package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
)

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/ui/feed?agent=a":        "/ui/feed?agent=a",
		"/ui/":                    "/ui/",
		"":                        "/ui/",
		"https://evil.example/ui": "/ui/",
		"//evil.example/ui/":      "/ui/",
		"/\\evil.example/ui/":     "/ui/",
		"/v1/agents":              "/ui/",
		"javascript:alert(1)":     "/ui/",
		"/ui/../v1/agents":        "/ui/",
		"/ui":                     "/ui",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/ui/feed", "//x/ui/", "https://x/ui/", "/ui/%2e%2e/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := url.Parse(safeNext(s))
		if err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(path.Clean(u.Path)+"/", Prefix) {
			t.Fatalf("safeNext(%q) leaves the dashboard: %q", s, safeNext(s))
		}
	})
}

// TestTreeByParent: the session page draws calltree's trees, one per
// agent: calls under their parent with all their entries; another agent's
// call naming a call of this session stays in its own agent's tree.
func TestTreeByParent(t *testing.T) {
	t.Parallel()
	hit := func(seq int64, agent, id, parent, phase string) auditindex.Hit {
		return auditindex.Hit{Seq: seq, Entry: &gateway.Entry{Agent: agent, ID: id, Parent: parent, Phase: phase, Decision: "allow"}}
	}
	got := trees([]auditindex.Hit{
		hit(1, "a", "model", "", "decision"),
		hit(2, "a", "exec", "model", "decision"),
		hit(3, "a", "echo", "exec", "decision"),
		hit(4, "b", "graft", "exec", "decision"),
		hit(5, "a", "echo", "exec", "result"),
		hit(6, "a", "exec", "model", "result"),
		hit(7, "a", "orphan", "elsewhere", "decision"),
	})
	var shape []string
	var walk func(ns []*node, depth int)
	walk = func(ns []*node, depth int) {
		for _, n := range ns {
			shape = append(shape, strings.Repeat(">", depth)+n.ID+":"+string(rune('0'+len(n.Entries))))
			walk(n.Kids, depth+1)
		}
	}
	for _, tr := range got {
		shape = append(shape, tr.Agent+"/"+string(rune('0'+tr.Calls)))
		walk(tr.Roots, 0)
	}
	want := "a/4 model:1 >exec:2 >>echo:2 orphan:1 b/1 graft:1"
	if strings.Join(shape, " ") != want {
		t.Fatalf("trees = %v, want %s", shape, want)
	}
}

// TestAccess: the pages take a viewer or admin token (header or cookie),
// nothing else; login keeps the token in a strict cookie; answering an
// approval takes an admin session's own same-origin form.
func TestAccess(t *testing.T) {
	t.Parallel()
	store, err := auth.OpenStore(filepath.Join(t.TempDir(), "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, _ := store.Create(auth.ScopeViewer, "", 0)
	admin, _, _ := store.Create(auth.ScopeAdmin, "", 0)
	mcpTok, _, _ := store.Create(auth.ScopeMCP, "a", 0)
	var refused []string
	d := New(Options{Tokens: store, Approvals: approval.New(nil),
		Agents:   func(context.Context) ([]api.AgentStatus, error) { return nil, nil },
		Config:   func() *config.Config { return &config.Config{} },
		OnRefuse: func(r *http.Request, reason string) { refused = append(refused, reason) }})
	defer d.Close()
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path, bearer string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct {
		name, token string
		status      int
	}{{"none", "", 303}, {"viewer", viewer, 200}, {"admin", admin, 200}, {"mcp", mcpTok, 303}, {"bogus", "tg_nope", 303}} {
		for _, p := range []string{"/ui/", "/ui/feed", "/ui/denials", "/ui/policy", "/ui/approvals", "/ui/session/s", "/ui/entry/x"} {
			if got := get(p, c.token).StatusCode; got != c.status {
				t.Errorf("%s token on %s: %d, want %d", c.name, p, got, c.status)
			}
		}
	}
	if len(refused) != 14 {
		t.Errorf("refusals recorded: %d, want 14 (mcp and bogus on 7 pages)", len(refused))
	}

	resp, err := noFollow.PostForm(srv.URL+"/ui/login", url.Values{"token": {mcpTok}})
	if err != nil || resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Fatalf("login with an mcp token: %v %v %v", err, resp.Status, resp.Cookies())
	}
	resp, err = noFollow.PostForm(srv.URL+"/ui/login", url.Values{"token": {viewer}, "next": {"https://evil.example/"}})
	if err != nil || resp.StatusCode != 303 || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %v %v %q", err, resp.Status, resp.Header.Get("Location"))
	}
	c := resp.Cookies()[0]
	if c.Name != CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui" || c.Value != viewer {
		t.Fatalf("cookie %+v", c)
	}

	post := func(token string, form url.Values, origin string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/ui/approvals/nope", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: CookieName, Value: token})
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tok, _ := store.Lookup(admin)
	good := url.Values{"csrf": {d.csrf(tok)}, "approve": {"yes"}}
	vtok, _ := store.Lookup(viewer)
	for _, c := range []struct {
		name, token string
		form        url.Values
		origin      string
		status      int
	}{
		{"viewer", viewer, url.Values{"csrf": {d.csrf(vtok)}, "approve": {"yes"}}, "", 403},
		{"admin without form token", admin, url.Values{"approve": {"yes"}}, "", 403},
		{"admin, other origin", admin, good, "https://evil.example", 403},
		{"admin, own form", admin, good, srv.URL, 404}, // nothing waits under that id
	} {
		if got := post(c.token, c.form, c.origin); got != c.status {
			t.Errorf("%s: %d, want %d", c.name, got, c.status)
		}
	}
}

// TestSessionLabels: the session page names each label the session's
// allowed calls gave, from its first giver; a denied call's, a result's
// and a forged field's labels are not labels.
func TestSessionLabels(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 12, 7, 12, 1, 3, 0, time.UTC)
	hit := func(seq int64, id, phase, decision string, labels ...any) auditindex.Hit {
		e := &gateway.Entry{Agent: "a", ID: id, Phase: phase, Decision: decision, Tool: "read", TS: ts,
			Detail: map[string]any{"labels": labels, "target": "/workspace/" + id}}
		return auditindex.Hit{Seq: seq, Entry: e}
	}
	got := sessionLabels([]auditindex.Hit{
		hit(1, "c1", "decision", "deny", "private"),
		hit(2, "c2", "decision", "allow", "private"),
		hit(3, "c2", "result", "allow", "untrusted"),
		hit(4, "c3", "decision", "allow", "private", "external"),
	})
	want := []labelRow{{Label: "private", ID: "c2", Tool: "read", Target: "/workspace/c2", TS: "12:01:03"},
		{Label: "external", ID: "c3", Tool: "read", Target: "/workspace/c3", TS: "12:01:03"}}
	if !slices.Equal(got, want) {
		t.Fatalf("labels %+v, want %+v", got, want)
	}
	if r := rowOf(hit(5, "c4", "decision", "allow", "private")); !slices.Equal(r.Labels, []string{"private"}) {
		t.Errorf("row %+v", r)
	}
}
