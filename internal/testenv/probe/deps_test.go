package probe

import (
	"slices"
	"strings"
	"testing"
)

// The check itself: a package outside the list is named with what pulled
// it in, also when only an allowed package imports it; the standard library
// and the allowed ones pass; an empty listing is an error.
func TestBeyondNamesOffenders(t *testing.T) {
	const m = Module
	list := `{"ImportPath":"net/http","Standard":true}
{"ImportPath":"` + m + `/internal/proto"}
{"ImportPath":"` + m + `/internal/host/door/egress","Imports":["net/http"]}
{"ImportPath":"example.com/x"}
{"ImportPath":"` + m + `/internal/guest","Imports":["` + m + `/internal/proto","` + m + `/internal/host/door/egress","example.com/x"]}
`
	bad, err := Beyond(strings.NewReader(list), []string{m + "/internal/proto", m + "/internal/guest"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		m + "/internal/host/door/egress (imported by " + m + "/internal/guest)",
		"example.com/x (imported by " + m + "/internal/guest): not our code",
	}
	if !slices.Equal(bad, want) {
		t.Errorf("offenders %q, want %q", bad, want)
	}
	if _, err := Beyond(strings.NewReader(""), nil); err == nil {
		t.Error("an empty listing passed")
	}
}
