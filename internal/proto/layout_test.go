package proto

import (
	"strings"
	"testing"
)

func TestValidCallID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"0123abcdef": true, "call-1_x": true, "": false, "..": false, "a/b": false,
		"a b": false, "a\n": false, strings.Repeat("a", 129): false,
	} {
		if got := ValidCallID(id); got != want {
			t.Errorf("ValidCallID(%q) = %v", id, got)
		}
	}
}

func FuzzValidCallID(f *testing.F) {
	f.Add("abc")
	f.Add("../x")
	f.Fuzz(func(t *testing.T, id string) {
		if ValidCallID(id) && (strings.ContainsAny(id, "/.\x00") || id == "") {
			t.Fatalf("unsafe id %q accepted", id)
		}
	})
}
