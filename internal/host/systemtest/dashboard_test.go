package systemtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/testenv"
)

// browser starts a real headless Chromium with a fresh profile and nothing
// that reaches the network by itself. Missing, the test fails in CI. Its
// temporary files are in the test's directory too: the directory of its
// singleton socket, which it leaves when it is killed (as chromedp ends
// it), piled up in /tmp otherwise.
func browser(t *testing.T) context.Context {
	t.Helper()
	testenv.NeedPrograms(t, "chromium")
	path, _ := exec.LookPath("chromium")
	dir := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")), chromedp.Env("TMPDIR=" + dir), chromedp.WindowSize(1400, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel3)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// TestBrowserTempInTest: the browser's singleton socket, which a killed
// browser leaves behind, is in the test's own directory, not in /tmp.
func TestBrowserTempInTest(t *testing.T) {
	ctx := browser(t)
	pid := chromedp.FromContext(ctx).Browser.Process().Pid
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	var profile string
	for _, arg := range strings.Split(string(cmdline), "\x00") {
		if v, ok := strings.CutPrefix(arg, "--user-data-dir="); ok {
			profile = v
		}
	}
	if profile == "" {
		t.Fatalf("browser %d has no --user-data-dir: %q", pid, cmdline)
	}
	sock, err := os.Readlink(filepath.Join(profile, "SingletonSocket"))
	if err != nil {
		t.Fatalf("the browser's singleton socket: %v", err)
	}
	if !strings.HasPrefix(sock, filepath.Dir(profile)+string(filepath.Separator)) {
		t.Fatalf("the browser's singleton socket is %s, outside the test's %s: a killed browser leaves its directory", sock, filepath.Dir(profile))
	}
}

// freePort is a loopback address nothing listens on.
func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// screenshot saves the page: into docs/img with TOOLGATE_SCREENSHOTS=1
// (how the README's pictures are made), else beside the test.
func screenshot(t *testing.T, name string) chromedp.Action[chromedp.Void] {
	dir := t.TempDir()
	if os.Getenv("TOOLGATE_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "..", "..", "docs", "img")
	}
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		buf, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return chromedp.Void{}, err
		}
		return chromedp.Void{}, os.WriteFile(filepath.Join(dir, "dashboard-"+name+".png"), buf, 0o644)
	}
}

// text reads the text of the first element sel matches.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// dashboardEnv is a daemon listening on TCP (the dashboard, the admin API)
// whose agents may call the builtin echo, and a viewer token.
func dashboardEnv(t *testing.T, agents ...string) (e *Env, addr, viewer string) {
	t.Helper()
	addr = freePort(t)
	e = NewWith(t, Extra{
		Gateway:   "  listen: " + addr + "\n",
		Top:       "plugins:\n  echo: {kind: builtin, builtin: toolgate-echo}\n",
		AgentKeys: "    tools: [echo]\n",
	}, agents...)
	store, err := auth.OpenStore(filepath.Join(e.Home, auth.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	if viewer, _, err = store.Create(auth.ScopeViewer, "", time.Hour); err != nil {
		t.Fatal(err)
	}
	return e, addr, viewer
}

// TestDashboardInBrowser drives the dashboard in a real Chromium: a viewer
// logs in by pasting a token, sees a call made during the test arrive in
// the live feed without a reload, opens its session as a tree and the
// call's entry; and a viewer token is refused on every route that changes
// something or calls a tool.
func TestDashboardInBrowser(t *testing.T) {
	e, addr, viewer := dashboardEnv(t, "dash")
	a := e.Agents[0]
	base := "http://" + addr
	// A denial, so the denials and policy pages have something to show.
	_, _ = e.Call(a, "exec", map[string]any{"command": "rm -rf /tmp/x"})

	ctx := browser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/feed"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		screenshot(t, "login"),
	); err != nil {
		t.Fatal(err)
	}
	loginURL, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), viewer),
		chromedp.Click(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`#feed`)),
		chromedp.WaitVisible(chromedp.CSS(`#pause`)), // the script runs: the feed follows
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loginURL, "/ui/login?next=%2Fui%2Ffeed") {
		t.Fatalf("not sent to the login page: %s", loginURL)
	}

	// A call in a session: exec runs the echo launcher, whose plugin call
	// is the exec's child.
	const session = "dash-session-1"
	id, took := callInSession(t, e, a, session, "/tools/bin/echo hello-from-the-test")
	row := fmt.Sprintf(`#feed tr[data-id=%q]`, id)
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("call %s never appeared in the live feed: %v", id, err)
	}
	t.Logf("live feed: the call (%v) reached the browser %v after it returned", took, time.Since(start))
	// The exec's result follows its child's entries in the log.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#feed tr[data-id=%q][data-phase="result"]`, id)))); err != nil {
		t.Fatal(err)
	}
	feedText := text(t, ctx, `#feed`)
	if err := chromedp.Do(ctx, screenshot(t, "feed")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(feedText, "echo") {
		t.Fatalf("the echo plugin call is not in the feed: %s", feedText)
	}

	// Its session, as a tree: the echo call under the exec.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(row+` a[href^="/ui/session/"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tree`)),
		screenshot(t, "session"),
	); err != nil {
		t.Fatal(err)
	}
	tree := text(t, ctx, `#tree ul.tree`)
	if !strings.Contains(tree, "echo") {
		t.Fatalf("the echo call is not a child in the session tree: %q", tree)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/entry/"+id), screenshot(t, "entry")); err != nil {
		t.Fatal(err)
	}
	entry := text(t, ctx, `main`)
	if !strings.Contains(entry, "the line hashes to its hash") || !strings.Contains(entry, "follows entry") {
		t.Fatalf("entry page without its verification: %s", entry)
	}
	for _, p := range []struct{ path, want string }{
		{"/ui/", a}, {"/ui/denials", "no-rm-rf"}, {"/ui/policy", "no-rm-rf"}, {"/ui/approvals", "nothing waits"},
	} {
		name := strings.Trim(strings.TrimPrefix(p.path, "/ui"), "/")
		if name == "" {
			name = "agents"
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(base+p.path), screenshot(t, name)); err != nil {
			t.Fatal(err)
		}
		if got := text(t, ctx, `main`); !strings.Contains(got, p.want) {
			t.Errorf("%s: no %q in %s", p.path, p.want, got)
		}
	}

	// The viewer token changes nothing and calls nothing, on any door.
	before := len(e.Entries(audit.Filter{Agent: a, Tool: "exec"}))
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/agents/" + a + "/tools/exec/call", `{"command":"touch /tmp/viewer"}`},
		{"POST", "/v1/agents/" + a + "/tools/echo/call", `{"argv":["x"]}`},
		{"POST", "/v1/policy/eval", `{"agent":"` + a + `","tool":"exec","args":{"command":"true"}}`},
		{"POST", "/v1/approvals/x", `{"approve":true}`},
		{"POST", "/v1/agents/" + a + "/observations", `{}`},
		{"GET", "/v1/agents", ""},
		{"GET", "/v1/approvals", ""},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"true"}}}`},
	} {
		if st := status(t, r.method, base+r.path, "Bearer "+viewer, nil, r.body); st != http.StatusUnauthorized {
			t.Errorf("viewer token on %s %s: %d, want 401", r.method, r.path, st)
		}
	}
	cookie := &http.Cookie{Name: "toolgate_ui", Value: viewer}
	if st := status(t, "POST", base+"/ui/approvals/x", "", cookie, url.Values{"approve": {"yes"}}.Encode()); st != http.StatusForbidden {
		t.Errorf("viewer answering an approval on the dashboard: %d, want 403", st)
	}
	// The admin token answers only by a form of its own session.
	adminCookie := &http.Cookie{Name: "toolgate_ui", Value: e.Token}
	if st := status(t, "POST", base+"/ui/approvals/x", "", adminCookie, url.Values{"approve": {"yes"}, "csrf": {"forged"}}.Encode()); st != http.StatusForbidden {
		t.Errorf("admin form without the session's form token: %d, want 403", st)
	}
	if after := len(e.Entries(audit.Filter{Agent: a, Tool: "exec"})); after != before {
		t.Errorf("a viewer token ran exec: %d exec entries, had %d", after, before)
	}
	refused := e.Entries(audit.Filter{Type: "admin"})
	if len(refused) < 9 {
		t.Errorf("viewer refusals not all on record: %d admin entries", len(refused))
	}
	e.Verify()
}

// callInSession runs command by exec in session through the admin API
// and returns its call id and how long it took.
func callInSession(t *testing.T, e *Env, agent, session, command string) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	req, _ := http.NewRequest("POST", "http://"+strings.TrimPrefix(e.listen(), "http://")+"/v1/agents/"+agent+"/tools/exec/call",
		strings.NewReader(fmt.Sprintf(`{"command":%q}`, command)))
	req.Header.Set("Authorization", "Bearer "+e.Token)
	req.Header.Set("Toolgate-Session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("exec in session: %s", resp.Status)
	}
	return resp.Header.Get("Toolgate-Call-Id"), time.Since(start)
}

// listen is the daemon's TCP address from its config.
func (e *Env) listen() string {
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(e.Extra.Gateway), "listen:"))
}

func status(t *testing.T, method, u, authz string, cookie *http.Cookie, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if cookie != nil {
		req.AddCookie(cookie)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if strings.HasSuffix(u, "/mcp") {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
