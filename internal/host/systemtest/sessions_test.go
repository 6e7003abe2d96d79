package systemtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// treeLine is one call of `toolgate audit show --session` output.
type treeLine struct {
	tree   string // the agent whose tree it is in (the header's)
	agent  string // the agent its line names
	parent string // the call it is drawn under, "" at a root
}

// parseTree reads `audit show --session` output: a header per agent's
// tree ("session S of agent A: …"), then a line per call ending in
// "(id)", indented two spaces per level, its agent the second word.
func parseTree(out string) map[string]treeLine {
	calls := map[string]treeLine{}
	var tree string
	var path []string // the ids of the last line at each depth
	for _, l := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(l, " of agent "); ok && strings.HasPrefix(l, "session ") {
			tree, _, _ = strings.Cut(rest, ":")
			path = nil
			continue
		}
		open, end := strings.LastIndex(l, "("), strings.LastIndex(l, ")")
		words := strings.Fields(l)
		if open < 0 || end != len(l)-1 || len(words) < 2 || !strings.HasPrefix(l, "  ") {
			continue
		}
		depth := (len(l) - len(strings.TrimLeft(l, " "))) / 2
		id := l[open+1 : end]
		path = append(path[:min(depth-1, len(path))], id)
		tl := treeLine{tree: tree, agent: words[1]}
		if depth > 1 && len(path) >= depth {
			tl.parent = path[depth-2]
		}
		calls[id] = tl
	}
	return calls
}

// TestSessionGraftRefused: agent B's sandbox names agent A's session and
// A's run as the session and parent of its own plugin calls (the hints
// its processes send). The gateway does not link a call to another
// agent's call it knows (the hint kept, unlinked, in the entry's detail);
// after a restart, when it no longer knows the call, the hint is recorded
// as sent, and every reader still keeps B's calls out of A's session: the
// CLI's tree draws each agent's calls apart, each line naming its agent;
// queries ask which agent's session is meant and match a parent's calls of
// its own agent only; the dashboard's session page draws a tree per agent.
func TestSessionGraftRefused(t *testing.T) {
	e, addr, viewer := dashboardEnv(t, "graft-a", "graft-b")
	a, b := e.Agents[0], e.Agents[1]
	const session = "graft-session-1"
	runA, _ := callInSession(t, e, a, session, "/tools/bin/echo mine")
	graft := func(word string) *gateway.Entry {
		t.Helper()
		cmd := fmt.Sprintf("TOOLGATE_CALL_ID=%s TOOLGATE_SESSION=%s /tools/bin/echo %s", runA, session, word)
		if res, err := e.Call(b, "exec", map[string]any{"command": cmd}); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("agent b's exec: %+v %v", res, err)
		}
		for _, en := range e.Entries(audit.Filter{Agent: b, Tool: "echo"}) {
			if en.Phase == gateway.PhaseDecision && strings.Contains(string(en.Args), word) {
				return en
			}
		}
		t.Fatalf("agent b's echo %s is not on the record", word)
		return nil
	}
	known := graft("graft-known")
	if known.Session != session || known.Parent != "" || known.Detail[gateway.DetailUnlinkedParent] != runA {
		t.Errorf("a parent hint naming agent a's call, linked: session %q, parent %q, detail %v", known.Session, known.Parent, known.Detail)
	}
	// A restart: the gateway no longer knows whose call runA is.
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Start()
	forgotten := graft("graft-forgotten")
	if forgotten.Parent != runA {
		t.Fatalf("after a restart the hint is recorded as sent, want parent %s: %+v", runA, forgotten)
	}
	var mine string
	for _, en := range e.Entries(audit.Filter{Agent: a, Tool: "echo"}) {
		mine = en.ID
	}

	// audit show --session: A's tree holds A's calls only; B's are a tree of
	// their own, and every line names its agent.
	out, code := e.CLI("", "audit", "show", "--session", session)
	tree := parseTree(out)
	if code != 0 || tree[runA].tree != a || tree[mine].parent != runA || tree[mine].agent != a {
		t.Fatalf("audit show --session: exit %d, a's run and echo not a's tree:\n%s", code, out)
	}
	for _, g := range []*gateway.Entry{known, forgotten} {
		if got := tree[g.ID]; got.tree != b || got.agent != b || got.parent != "" {
			t.Errorf("agent b's call %s drawn as %+v, want a root of b's tree:\n%s", g.ID, got, out)
		}
	}
	out, code = e.CLI("", "audit", "show", "--session", session, "--agent", a)
	if code != 0 || strings.Contains(out, b) || !strings.Contains(out, mine) {
		t.Errorf("audit show --session --agent a: exit %d\n%s", code, out)
	}

	// audit query: a session is one agent's; a parent's calls are its agent's.
	out, code = e.CLI("", "audit", "query", "--session", session)
	if code == 0 || !strings.Contains(out, "has entries of 2 agents") {
		t.Errorf("audit query --session of two agents' entries: exit %d\n%s", code, out)
	}
	out, code = e.CLI("", "audit", "query", "--session", session, "--agent", a, "--format", "json")
	if code != 0 || strings.Contains(out, known.ID) || strings.Contains(out, forgotten.ID) || !strings.Contains(out, mine) {
		t.Errorf("audit query --session --agent a: exit %d\n%s", code, out)
	}
	out, code = e.CLI("", "audit", "query", "--parent", runA, "--format", "json")
	if code != 0 || strings.Contains(out, forgotten.ID) || !strings.Contains(out, mine) {
		t.Errorf("audit query --parent (a's run): exit %d\n%s", code, out)
	}

	// The dashboard's session page: a tree per agent. get waits for the
	// index, which follows the log, to hold what the page must show.
	get := func(path, want string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+viewer)
		for deadline := time.Now().Add(10 * time.Second); ; {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), want) || time.Now().After(deadline) {
				return string(body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	page := get("/ui/session/"+session, forgotten.ID)
	_, treeA, _ := strings.Cut(page, fmt.Sprintf(`data-agent="%s"`, a))
	treeA, treeB, _ := strings.Cut(treeA, fmt.Sprintf(`data-agent="%s"`, b))
	if !strings.Contains(treeA, mine) || strings.Contains(treeA, known.ID) || strings.Contains(treeA, forgotten.ID) ||
		!strings.Contains(treeB, known.ID) || !strings.Contains(treeB, forgotten.ID) {
		t.Errorf("dashboard session page: a's tree and b's tree not apart:\n%s", page)
	}
	// The entry page of b's call shows its hint, not a link to a's call.
	page = get("/ui/entry/"+forgotten.ID, forgotten.ID)
	if strings.Contains(page, "/ui/entry/"+runA) || !strings.Contains(page, "names another agent's call: not linked") {
		t.Errorf("dashboard entry page of b's call links a's run:\n%s", page)
	}
}
