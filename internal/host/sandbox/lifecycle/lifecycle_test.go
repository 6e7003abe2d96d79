package lifecycle

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/host/sandbox"
)

// TestUnder: prune deletes a workspace only inside the home, never the
// home itself nor a path that climbs out of it.
func TestUnder(t *testing.T) {
	o := &Ops{Home: "/srv/tg"}
	for dir, want := range map[string]bool{
		"/srv/tg/agents/a/workspace": true,
		"/srv/tg":                    false,
		"/srv/tg/":                   false,
		"/srv/tg/../etc":             false,
		"/srv/tgx/agents/a":          false,
		"/":                          false,
		"":                           false,
		"/srv/tg/..x/w":              true, // a name that starts with dots is inside
	} {
		if got := o.under(dir); got != want {
			t.Errorf("under(%q) = %v, want %v", dir, got, want)
		}
	}
	if (&Ops{}).under("/srv/tg/a") {
		t.Error("with no home, nothing is under it")
	}
}

// TestPlace: where a found sandbox stands for a home, and what prune takes.
func TestPlace(t *testing.T) {
	alive := t.TempDir()
	if err := os.WriteFile(filepath.Join(alive, "config.yaml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(t.TempDir(), "removed")
	configured := func(a string) bool { return a == "demo" }
	for _, c := range []struct {
		f              sandbox.Found
		place          string
		prune, unknown bool
	}{
		{sandbox.Found{Agent: "demo", Instance: "me"}, sandbox.PlaceHere, false, false},
		{sandbox.Found{Agent: "old", Instance: "me"}, sandbox.PlaceUnused, true, true},
		{sandbox.Found{Agent: "demo", Instance: "them", Home: alive}, sandbox.PlaceOtherHome, false, false},
		{sandbox.Found{Agent: "demo", Instance: "them", Home: gone}, sandbox.PlaceLeftBehind, true, true},
		{sandbox.Found{Agent: "demo", Instance: "them"}, sandbox.PlaceUnknown, false, true},
	} {
		p := c.f.Place("me", configured)
		if p != c.place || sandbox.Prunable(p, false) != c.prune || sandbox.Prunable(p, true) != c.unknown {
			t.Errorf("%+v: place %q prunable %v/%v, want %q %v/%v", c.f, p, sandbox.Prunable(p, false), sandbox.Prunable(p, true), c.place, c.prune, c.unknown)
		}
	}
}
