package mcp

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/auth"
)

func writeSkill(t testing.TB, home, dir, text string) {
	t.Helper()
	p := filepath.Join(home, dir, SkillFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseSkill(t *testing.T) {
	cases := []struct {
		name, in, want, err string
	}{
		{"ok", "---\nname: a\ndescription: does a\nlicense: MIT\n---\n# A\n", "does a", ""},
		{"crlf and bom", "\uFEFF---\r\nname: a\r\ndescription: d\r\n---\r\nbody", "d", ""},
		{"closing at end", "---\nname: a\ndescription: d\n---", "d", ""},
		{"no front matter", "# just markdown\n", "", "no front matter"},
		{"unclosed", "---\nname: a\ndescription: d\n", "", "not closed"},
		{"bad yaml", "---\nname: [a\ndescription: d\n---\n", "", "front matter"},
		{"no description", "---\nname: a\n---\n", "", "no description"},
		{"no name", "---\ndescription: d\n---\n", "", "no name"},
		{"not a mapping", "---\n- a\n- b\n---\n", "", "front matter"},
		{"invalid UTF-8", "---\nname: a\ndescription: \xff\n---\n", "", "UTF-8"},
	}
	for _, c := range cases {
		m, err := ParseSkill([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || m.Description != c.want {
			t.Errorf("%s: %+v %v", c.name, m, err)
		}
	}
}

func TestCheckSkillURI(t *testing.T) {
	for uri, ok := range map[string]bool{
		"skill://global/commit":        true,
		"skill://a/x.y-z_1":            true,
		"skill://global/../etc":        false,
		"skill://../global/x":          false,
		"skill:///etc/passwd":          false,
		"skill://global//etc/passwd":   false,
		"skill://global/a/b":           false,
		"skill://global/%2e%2e":        false,
		"skill://global/a%2fb":         false,
		"file:///etc/passwd":           false,
		"/etc/passwd":                  false,
		"skill://global/x?y=1":         false,
		"skill://global/.hidden":       false,
		"skill://global/":              false,
		"skill:global/x":               false,
		"skill://global/x#frag":        false,
		"skill://global/" + "\x00":     false,
		"skill://global/..%2f..%2fetc": false,
	} {
		if err := CheckSkillURI(uri); (err == nil) != ok {
			t.Errorf("CheckSkillURI(%q) = %v, want ok=%v", uri, err, ok)
		}
	}
}

func resourceURIs(t *testing.T, cs *sdk.ClientSession) map[string]*sdk.Resource {
	t.Helper()
	out := map[string]*sdk.Resource{}
	for r, err := range cs.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[r.URI] = r
	}
	return out
}

func TestSkillsResources(t *testing.T) {
	f := newFixture(t, testConfig, Options{PollEvery: 20 * time.Millisecond})
	writeSkill(t, f.home, "skills/commit", "---\nname: commit-protocol\ndescription: how to commit\n---\n# Mission repo + commit protocol\n")
	writeSkill(t, f.home, "skills/broken", "---\nname: [oops\n---\n")
	writeSkill(t, f.home, "skills/binary", "---\nname: b\ndescription: \xff\xfe\n---\n")
	writeSkill(t, f.home, "agents/a/skills/private", "---\nname: private\ndescription: only a\n---\nsecret sauce\n")
	writeSkill(t, f.home, "agents/b/skills/bees", "---\nname: bees\ndescription: only b\n---\n")
	if err := os.MkdirAll(filepath.Join(f.home, "skills", "no-skill-file"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.door.skills.scan()

	global := []string{"skill://global/binary", "skill://global/broken", "skill://global/commit"}
	for _, c := range []struct {
		who    string
		secret string
		want   []string
	}{
		{"skills token", f.token(t, auth.ScopeSkills, ""), global},
		{"skills token bound to b", f.token(t, auth.ScopeSkills, "b"), append(slices.Clone(global), "skill://b/bees")},
		{"mcp token of a", f.token(t, auth.ScopeMCP, "a"), append(slices.Clone(global), "skill://a/private")},
	} {
		cs := f.mustConnect(t, c.secret)
		got := resourceURIs(t, cs)
		keys := slices.Sorted(maps.Keys(got))
		slices.Sort(c.want)
		if !slices.Equal(keys, c.want) {
			t.Errorf("%s lists %v, want %v", c.who, keys, c.want)
		}
		if d := got["skill://global/broken"].Description; !strings.HasPrefix(d, "error: ") {
			t.Errorf("broken skill described as %q", d)
		}
		if d := got["skill://global/binary"].Description; !strings.Contains(d, "UTF-8") {
			t.Errorf("binary skill described as %q", d)
		}
		res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "skill://global/commit"})
		if err != nil || !strings.HasPrefix(res.Contents[0].Text, "---") || !strings.Contains(res.Contents[0].Text, "# Mission repo") {
			t.Fatalf("%s read: %v %+v", c.who, err, res)
		}
		if _, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "skill://global/binary"}); err == nil {
			t.Errorf("invalid UTF-8 skill read without error")
		}
		for _, bad := range []string{"skill://global/../../etc/passwd", "skill:///etc/passwd", "/etc/passwd", "skill://global/..%2f..%2fconfig.yaml"} {
			_, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: bad})
			var rpc *jsonrpc.Error
			if err == nil || !strings.Contains(err.Error(), "URI") {
				t.Errorf("%s: read %q: %v %T", c.who, bad, err, rpc)
			}
		}
	}
	// Another agent's skill is not readable even by URI.
	b := f.mustConnect(t, f.token(t, auth.ScopeMCP, "b"))
	if _, err := b.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "skill://a/private"}); err == nil {
		t.Fatal("agent b read agent a's skill")
	}
}

func TestSkillChangeNotifications(t *testing.T) {
	f := newFixture(t, testConfig, Options{PollEvery: 20 * time.Millisecond})
	writeSkill(t, f.home, "skills/one", "---\nname: one\ndescription: first\n---\n")
	f.door.skills.scan()
	listChanged := make(chan struct{}, 16)
	updated := make(chan string, 16)
	cs, err := f.connect(t, f.token(t, auth.ScopeSkills, ""), &sdk.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) { listChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(context.Background(), &sdk.SubscribeParams{URI: "skill://global/one"}); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, f.home, "skills/two", "---\nname: two\ndescription: second\n---\n")
	wait(t, listChanged, "resources/list_changed after adding a skill")
	if got := resourceURIs(t, cs); len(got) != 2 {
		t.Fatalf("after adding: %v", got)
	}
	// Same size, new content: the mtime tells.
	writeSkill(t, f.home, "skills/one", "---\nname: one\ndescription: FIRST\n---\n")
	os.Chtimes(filepath.Join(f.home, "skills/one", SkillFile), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if uri := wait(t, updated, "resources/updated after editing a skill"); uri != "skill://global/one" {
		t.Fatalf("updated %q", uri)
	}
	if err := os.RemoveAll(filepath.Join(f.home, "skills/two")); err != nil {
		t.Fatal(err)
	}
	// Notifications of the edit may still be queued: wait until the list shows the removal.
	for {
		wait(t, listChanged, "resources/list_changed after removing a skill")
		if got := resourceURIs(t, cs); len(got) == 1 {
			if d := got["skill://global/one"].Description; d != "FIRST" {
				t.Fatalf("edited skill described as %q", d)
			}
			break
		}
	}
}

// wait receives one value, failing the test if none arrives in a long while
// (a hang guard, not a timing assertion).
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s", what)
	}
	var zero T
	return zero
}
