package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/replay/replaytest"
)

// TestReplaySameVerdicts is the property: replaying a recorded log under
// the policy that recorded it changes nothing, for any mix of calls.
func TestReplaySameVerdicts(t *testing.T) {
	t.Parallel()
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			calls := replaytest.RandomCalls(rand.New(rand.NewPCG(seed, 42)), 150)
			dir := recorded(t, replaytest.BaseYAML, calls)
			built := replaytest.Build(t, t.TempDir(), replaytest.BaseYAML)
			var changed []string
			sum, err := Log(dir, audit.Filter{}, built.Snapshot, func(o Outcome) error {
				if o.Change() != "" {
					changed = append(changed, fmt.Sprintf("%s %s %s: %+v → %+v", o.Agent, o.Tool, o.ID, o.Was, o.Now))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Replayed != len(calls) {
				t.Errorf("replayed %d of %d calls (summary %+v)", sum.Replayed, len(calls), sum)
			}
			if len(changed) > 0 {
				t.Errorf("%d verdicts changed under the same policy:\n%s", len(changed), strings.Join(changed, "\n"))
			}
			if sum.Same != len(calls) || sum.AllowedToDenied+sum.DeniedToAllowed != 0 {
				t.Errorf("summary %+v", sum)
			}
		})
	}
}

// TestReplayDiff: under a changed policy, replay reports exactly the calls
// whose live decision under that policy differs — nothing more, nothing less.
func TestReplayDiff(t *testing.T) {
	t.Parallel()
	changed := strings.Replace(replaytest.BaseYAML, "      - {name: no-shadow,",
		"      - {name: no-ls, deny: 'commands.exists(c, c.name == \"ls\")', reason: no ls}\n      - {name: no-shadow,", 1)
	changed = strings.Replace(changed, `{name: no-force, deny: 'tool == "git" && "--force" in argv', reason: no force push}`,
		`{name: no-force, deny: 'false', reason: force pushes are fine now}`, 1)
	calls := replaytest.RandomCalls(rand.New(rand.NewPCG(7, 7)), 200)
	dir := recorded(t, replaytest.BaseYAML, calls)

	// The expected diff: decide each call live under both policies.
	want := map[string]string{}
	oldB, newB := replaytest.Build(t, t.TempDir(), replaytest.BaseYAML), replaytest.Build(t, t.TempDir(), changed)
	for _, c := range replaytest.RandomCalls(rand.New(rand.NewPCG(7, 7)), 200) {
		c2 := *c
		_, r1 := gateway.Prepare(oldB.Snapshot, c)
		_, r2 := gateway.Prepare(newB.Snapshot, &c2)
		d1, d2 := decided(oldB, c, r1), decided(newB, &c2, r2)
		if o := (Outcome{Was: d1, Now: d2}); o.Change() != "" {
			want[c.Tool+" "+string(c.Args)] = o.Change()
		}
	}
	got := map[string]string{}
	byID := map[string]*gateway.Call{}
	for _, c := range calls {
		byID[c.ID] = c
	}
	sum, err := Log(dir, audit.Filter{}, newB.Snapshot, func(o Outcome) error {
		if o.Change() != "" {
			c := byID[o.ID]
			got[c.Tool+" "+string(c.Args)] = o.Change()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || sum.AllowedToDenied == 0 || sum.DeniedToAllowed == 0 {
		t.Fatalf("the changed policy should both allow and deny more (want %d changes, summary %+v)", len(want), sum)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: replay says %q, live decision says %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if want[k] == "" {
			t.Errorf("%s: replay reports %q, live decisions do not differ", k, v)
		}
	}
}

func decided(b *assemble.Built, c *gateway.Call, refused *gateway.Decision) gateway.Decision {
	if refused != nil {
		return *refused
	}
	d := b.Snapshot.Decider.Decide(c)
	d.Shadow = nil
	return d
}

// TestReplayMarksCutArguments: a command longer than the audit bound is
// decided on what the log kept, and said to be approximate.
func TestReplayMarksCutArguments(t *testing.T) {
	t.Parallel()
	long := "echo " + strings.Repeat("a", 2000) + " && rm -rf /"
	dir := recorded(t, replaytest.BaseYAML, []*gateway.Call{replaytest.Call("demo", "exec", map[string]any{"command": long})})
	built := replaytest.Build(t, t.TempDir(), replaytest.BaseYAML)
	var outs []Outcome
	if _, err := Log(dir, audit.Filter{}, built.Snapshot, func(o Outcome) error { outs = append(outs, o); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || !outs[0].Approximate || outs[0].Was.Allow {
		t.Fatalf("outcomes %+v", outs)
	}
}

func TestRestoreBodies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"path":"a","content":{"bytes":3}}`, `{"content":"xxx","path":"a"}`},
		{`{"path":"a","content":{"bytes":2},"encoding":"base64"}`, `{"content":"AAA=","encoding":"base64","path":"a"}`},
		{`{"path":"a","content":{"bytes":2,"other":1}}`, `{"path":"a","content":{"bytes":2,"other":1}}`},
		{`{"command":"cat","stdin":{"bytes":-5}}`, `{"command":"cat","stdin":""}`},
		{`[1,2]`, `[1,2]`},
	} {
		if got := string(restoreBodies(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("restoreBodies(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// BenchmarkReplay measures replay throughput over a recorded log of mixed
// calls (entries/s is reported), beside reading the same log without
// deciding (the baseline: what the files cost).
func BenchmarkReplay(b *testing.B) {
	calls := replaytest.RandomCalls(rand.New(rand.NewPCG(1, 1)), 2000)
	home := b.TempDir()
	built := replaytest.Build(b, home, replaytest.BaseYAML)
	dir := filepath.Join(home, "logs")
	w, err := audit.Open(dir, audit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	g := gateway.New(gateway.Options{Audit: w, BoundArgs: audit.NewBounder(1024).Bound}, built.Snapshot)
	for _, c := range calls {
		_, _ = g.Handle(context.Background(), c, nil)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("read-only-baseline", func(b *testing.B) {
		n := 0
		for b.Loop() {
			_ = audit.Query(dir, audit.Filter{}, func(*gateway.Entry) error { n++; return nil })
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "entries/s")
	})
	b.Run("replay", func(b *testing.B) {
		n := 0
		for b.Loop() {
			s, _ := Log(dir, audit.Filter{}, built.Snapshot, func(Outcome) error { return nil })
			n += s.Replayed + s.Skipped
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "entries/s")
	})
}

// recorded is the audit directory of calls recorded under cfgYAML.
func recorded(t *testing.T, cfgYAML string, calls []*gateway.Call) string {
	_, dir := replaytest.Record(t, cfgYAML, calls)
	return dir
}
