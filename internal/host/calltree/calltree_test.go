package calltree

import (
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// ent is one entry: agent, id, phase, decision, parent hint, and details.
func ent(agent, id, phase, decision, parent string, detail map[string]any) *gateway.Entry {
	return &gateway.Entry{Agent: agent, ID: id, Phase: phase, Decision: decision, Parent: parent, Detail: detail}
}

func toolUses(ids ...string) map[string]any {
	var l []any
	for _, id := range ids {
		l = append(l, id)
	}
	return map[string]any{gateway.DetailToolUseIDs: l}
}

func answers(id string) map[string]any { return map[string]any{gateway.DetailToolUseID: id} }

// shape renders trees as "agent/calls/denied: id >kid >>grandkid …".
func shape(trees []*Tree[*gateway.Entry]) string {
	var out []string
	var walk func(cs []*Call[*gateway.Entry], depth int)
	walk = func(cs []*Call[*gateway.Entry], depth int) {
		for _, c := range cs {
			out = append(out, strings.Repeat(">", depth)+c.First().ID)
			walk(c.Kids, depth+1)
		}
	}
	for _, t := range trees {
		out = append(out, t.Agent+"/"+strconv.Itoa(t.Calls)+"/"+strconv.Itoa(t.Denied)+":")
		walk(t.Roots, 0)
	}
	return strings.Join(out, " ")
}

func TestBuild(t *testing.T) {
	const D, R, A = gateway.PhaseDecision, gateway.PhaseResult, gateway.PhaseAsk
	for _, tc := range []struct {
		name    string
		entries []*gateway.Entry
		want    string
	}{{
		name: "by parent and by tool_use id",
		entries: []*gateway.Entry{
			ent("a", "run", D, "allow", "", nil),
			ent("a", "m1", D, "allow", "run", nil),
			ent("a", "m1", R, "allow", "run", toolUses("toolu_a", "toolu_b")),
			ent("a", "x1", D, "allow", "toolu_a", nil),            // the agent loop: parent is the tool_use id
			ent("a", "h1", D, "deny", "x1", nil),                  // what x1's process did
			ent("a", "g1", D, "allow", "run", answers("toolu_b")), // a hook or MCP call: parent the run, tool_use id in detail
			ent("a", "o1", D, "allow", "elsewhere", nil),
			ent("a", "run", R, "allow", "", nil),
		},
		want: "a/6/1: run >m1 >>x1 >>>h1 >>g1 o1",
	}, {
		name: "a tool called before its model call's result is written",
		entries: []*gateway.Entry{
			ent("a", "m1", D, "allow", "", nil),
			ent("a", "g1", D, "allow", "", answers("toolu_a")),
			ent("a", "m1", R, "allow", "", toolUses("toolu_a")),
		},
		want: "a/2/0: m1 >g1",
	}, {
		name: "another agent names this session's calls and tool_use ids",
		entries: []*gateway.Entry{
			ent("a", "run", D, "allow", "", nil),
			ent("a", "m1", D, "allow", "run", nil),
			ent("a", "m1", R, "allow", "run", toolUses("toolu_a")),
			ent("b", "graft1", D, "allow", "run", nil),
			ent("b", "graft2", D, "allow", "", answers("toolu_a")),
			ent("b", "graft3", D, "allow", "toolu_a", nil),
			ent("a", "mine", D, "allow", "run", nil),
		},
		want: "a/3/0: run >m1 >mine b/3/0: graft1 graft2 graft3",
	}, {
		name: "a cause comes before its effect: hints cannot loop",
		entries: []*gateway.Entry{
			ent("a", "x", D, "allow", "y", nil),
			ent("a", "y", D, "allow", "x", nil),
			ent("a", "self", D, "allow", "self", nil),
			ent("a", "z", D, "allow", "", answers("toolu_later")),
			ent("a", "m", R, "allow", "", toolUses("toolu_later")),
		},
		want: "a/5/0: x >y self z m",
	}, {
		name: "a tool_use id two answers emitted is the later one's",
		entries: []*gateway.Entry{
			ent("a", "m1", R, "allow", "", toolUses("toolu_1")),
			ent("a", "t1", D, "allow", "toolu_1", nil),
			ent("a", "m2", R, "allow", "", toolUses("toolu_1")),
			ent("a", "t2", D, "allow", "", answers("toolu_1")),
		},
		want: "a/4/0: m1 >t1 m2 >t2",
	}, {
		name: "an ask answered no is a denial; an observation is not",
		entries: []*gateway.Entry{
			ent("a", "asked", A, "ask", "", nil),
			ent("a", "asked", D, "deny", "", nil),
			ent("a", "tap", R, "reported", "", nil),
			ent("a", "ran", D, "allow", "", nil),
			ent("a", "ran", R, "allow", "", nil),
		},
		want: "a/3/1: asked tap ran",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := shape(Build(tc.entries, func(e *gateway.Entry) *gateway.Entry { return e }))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// BenchmarkBuildChain: a chain of hints as long as a hostile agent likes
// is drawn in time linear in its length (compare the two sizes).
func BenchmarkBuildChain(b *testing.B) {
	for _, n := range []int{10000, 20000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var entries []*gateway.Entry
			parent := ""
			for i := range n {
				id := "c" + strconv.Itoa(i)
				entries = append(entries, ent("a", id, gateway.PhaseDecision, "allow", parent, nil))
				parent = id
			}
			for b.Loop() {
				Build(entries, func(e *gateway.Entry) *gateway.Entry { return e })
			}
		})
	}
}

// FuzzBuild: whatever the hints (parents, tool_use ids, repeated and
// dangling ids), every call is drawn exactly once, in the tree of its own
// agent, after the call it is drawn under.
func FuzzBuild(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x10\x21\x32\x43\x54"))
	f.Add([]byte("\x11\x11\x22\x22\x33\x33\xff\x80"))
	f.Fuzz(func(t *testing.T, b []byte) {
		const D, R = gateway.PhaseDecision, gateway.PhaseResult
		var entries []*gateway.Entry
		for i := 0; i+1 < len(b) && len(entries) < 200; i += 2 {
			x, y := b[i], b[i+1]
			e := ent([]string{"a", "b"}[x&1], "c"+strconv.Itoa(int(x>>1&7)), []string{D, R}[y>>7], "allow", "", nil)
			switch y >> 5 & 3 {
			case 0:
				e.Parent = "c" + strconv.Itoa(int(y&7))
			case 1:
				e.Parent = "t" + strconv.Itoa(int(y&7))
			case 2:
				e.Detail = answers("t" + strconv.Itoa(int(y&7)))
			case 3:
				e.Detail = toolUses("t"+strconv.Itoa(int(y&7)), "t"+strconv.Itoa(int(y>>3&3)))
			}
			entries = append(entries, e)
		}
		pos := map[string]int{} // agent/id → first entry
		for i, e := range entries {
			if _, ok := pos[e.Agent+"/"+e.ID]; !ok {
				pos[e.Agent+"/"+e.ID] = i
			}
		}
		seen := map[string]bool{}
		var walk func(agent string, cs []*Call[*gateway.Entry], under string)
		walk = func(agent string, cs []*Call[*gateway.Entry], under string) {
			for _, c := range cs {
				key := c.First().Agent + "/" + c.First().ID
				if seen[key] || c.First().Agent != agent || (under != "" && pos[under] >= pos[key]) {
					t.Fatalf("%s drawn twice, in %s's tree, or under %s that follows it", key, agent, under)
				}
				for _, e := range c.entries {
					if e.Agent+"/"+e.ID != key {
						t.Fatalf("call %s holds entry %s/%s", key, e.Agent, e.ID)
					}
				}
				seen[key] = true
				walk(agent, c.Kids, key)
			}
		}
		calls := 0
		for _, tr := range Build(entries, func(e *gateway.Entry) *gateway.Entry { return e }) {
			calls += tr.Calls
			walk(tr.Agent, tr.Roots, "")
		}
		if len(seen) != len(pos) || calls != len(pos) {
			t.Fatalf("%d calls drawn, %d counted, %d in the entries", len(seen), calls, len(pos))
		}
	})
}
