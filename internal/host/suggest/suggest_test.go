package suggest

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/replay"
	"github.com/toolgate/toolgate/internal/host/replay/replaytest"
)

// TestSuggestRoundTrips is the property: for any mix of recorded calls,
// the suggestion for an agent loads, and replaying the log under it
// allows every call of the agent that was allowed — while calls it never
// made, which the current policy allows, are denied.
func TestSuggestRoundTrips(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		calls := replaytest.RandomCalls(rand.New(rand.NewPCG(seed, 7)), 150)
		home, dir := replaytest.Record(t, replaytest.BaseYAML, calls)
		path := filepath.Join(home, "config.yaml")
		if err := os.WriteFile(path, []byte(replaytest.BaseYAML), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(home, path)
		if err != nil {
			t.Fatal(err)
		}
		built := replaytest.Build(t, home, replaytest.BaseYAML)
		rep, err := Suggest(cfg, []byte(replaytest.BaseYAML), built.Snapshot, Options{Agent: "demo", Dir: dir})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		cand := replaytest.Build(t, home, string(rep.Config))
		sum, err := replay.Log(dir, audit.Filter{Agent: "demo"}, cand.Snapshot, func(o replay.Outcome) error {
			if o.Was.Allow && !o.Now.Allow {
				t.Errorf("seed %d: %s %s %s was allowed, the suggestion denies it: %+v", seed, o.Tool, o.ID, o.Kind, o.Now)
				es, _ := audit.Find(dir, o.ID)
				t.Logf("%s", es[0].Args)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Replayed == 0 || rep.Calls == 0 || rep.Rules == 0 {
			t.Fatalf("seed %d: nothing learned (%+v, %+v)", seed, sum, rep)
		}
		// Calls the agent never made: the current policy allows them, the
		// suggestion does not.
		for _, c := range []*gateway.Call{
			replaytest.Call("demo", "exec", map[string]any{"command": "nc -l 4444"}),
			replaytest.Call("demo", "exec", map[string]any{"command": "ls --recursive-weird-flag"}),
			replaytest.Call("demo", "read", map[string]any{"path": "/root/.ssh/id_rsa"}),
			replaytest.Call("demo", "write", map[string]any{"path": "/workspace/new/dir/x", "content": "x"}),
			replaytest.Call("demo", "git", map[string]any{"argv": []string{"remote", "add", "evil", "x"}}),
		} {
			if now := decide(t, built.Snapshot, c); !now.Allow {
				t.Fatalf("seed %d: the current policy denies %s %s", seed, c.Tool, c.Args)
			}
			if now := decide(t, cand.Snapshot, c); now.Allow {
				t.Errorf("seed %d: the suggestion allows %s %s, which the agent never did (%s)", seed, c.Tool, c.Args, now.Rule)
			}
		}
	}
}

func decide(t *testing.T, snap *gateway.Snapshot, c *gateway.Call) gateway.Decision {
	t.Helper()
	cc := *c
	if _, refused := gateway.Prepare(snap, &cc); refused != nil {
		return *refused
	}
	return snap.Decider.Decide(&cc)
}

// TestSuggestWrites: the suggestion keeps the file's comments and the
// agent's own rules, says what it narrowed, carries examples from the log,
// and refuses an agent it does not know or one without calls.
func TestSuggestWrites(t *testing.T) {
	t.Parallel()
	src := "# my gateway\n" + replaytest.BaseYAML
	calls := []*gateway.Call{
		replaytest.Call("demo", "exec", map[string]any{"command": "go test ./... && git status --short"}),
		replaytest.Call("demo", "exec", map[string]any{"command": "ls -la src"}),
		replaytest.Call("demo", "write", map[string]any{"path": "/workspace/src/a.go", "content": "package a"}),
		replaytest.Call("demo", "git", map[string]any{"argv": []string{"status"}}),
	}
	home, dir := replaytest.Record(t, src, calls)
	path := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := config.Load(home, path)
	built := replaytest.Build(t, home, src)
	rep, err := Suggest(cfg, []byte(src), built.Snapshot, Options{Agent: "demo", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	out := string(rep.Config)
	for _, want := range []string{"# my gateway", "name: no-recursive-delete", "default: deny", `tools: [git]`, `allow: []`,
		"name: suggested.commands", `c.name in ["git", "go", "ls"]`, `"ls": ["a", "l"]`, "go test ./... && git status --short",
		"name: suggested.write", `path.matches("^(/workspace/src)/[^/]+$")`, "name: suggested.tool.git", `argv[0] in ["status"]`,
		"read: false", "patch: false", "egress 203.0.113.7:443 dropped"} {
		if !strings.Contains(out, want) {
			t.Errorf("the suggestion lacks %s:\n%s", want, out)
		}
	}
	if rep.Calls != 4 || rep.Rules != 3 {
		t.Errorf("report %+v", rep)
	}
	for _, o := range []Options{{Agent: "nobody", Dir: dir}, {Agent: "other", Dir: dir}} {
		if _, err := Suggest(cfg, []byte(src), built.Snapshot, o); err == nil {
			t.Errorf("%s: no error", o.Agent)
		}
	}
	b, _ := json.Marshal(rep.Narrowed)
	if !strings.Contains(string(b), "default: deny (was allow)") {
		t.Errorf("narrowed: %s", b)
	}
}
