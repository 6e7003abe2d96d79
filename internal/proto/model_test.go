package proto

import (
	"strings"
	"testing"
)

func TestParseModelPath(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, parent, session, rest string }{
		{"/anth/v1/messages", "", "", "/anth/v1/messages"},
		{"/~c1~s/anth/v1/messages", "c1", "s", "/anth/v1/messages"},
		{"/~~s/oai/v1", "", "s", "/oai/v1"},
	} {
		p, s, r, ok := ParseModelPath(c.in)
		if !ok || p != c.parent || s != c.session || r != c.rest {
			t.Errorf("ParseModelPath(%q) = %q %q %q %v", c.in, p, s, r, ok)
		}
	}
}

// Whatever ParseModelPath accepts has valid hints and a rooted rest.
func FuzzParseModelPath(f *testing.F) {
	for _, s := range []string{"/anth/v1/messages", "/~c1~s/anth/v1", "/~~/x", "/~", "~/a", "/~a~b~c/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, s, rest, ok := ParseModelPath(in)
		if !ok {
			return
		}
		if (p != "" && !ValidCallID(p)) || (s != "" && !ValidCallID(s)) || !strings.HasPrefix(rest, "/") && rest != in {
			t.Fatalf("ParseModelPath(%q) = %q %q %q", in, p, s, rest)
		}
	})
}
