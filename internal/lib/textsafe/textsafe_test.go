package textsafe

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile holds what an agent puts in a tool argument to act on the
// operator's terminal or eye, with how Line shows it.
var hostile = []struct{ name, in, line string }{
	{"plain", "ls -la /workspace", "ls -la /workspace"},
	{"clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
	{"OSC 52 clipboard", "\x1b]52;c;cm0gLXJmIH4=\x07", `\x1b]52;c;cm0gLXJmIH4=\x07`},
	{"window title", "\x1b]0;owned\x1b\\", `\x1b]0;owned\x1b\`},
	{"carriage return", "rm -rf /\rls", `rm -rf /\rls`},
	{"forged line", "x\n12:00:00.000 hook Bash allow rm -rf /", `x\n12:00:00.000 hook Bash allow rm -rf /`},
	{"bidi override", "ls \u202efdp.exe", `ls \u202efdp.exe`},
	{"bidi isolates", "a\u2066b\u2067c\u2068d\u2069", `a\u2066b\u2067c\u2068d\u2069`},
	{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
	{"DEL and tab", "a\x7f\tb", `a\x7f\tb`},
	{"invalid UTF-8", "a\xff\xc3b", `a\xff\xc3b`},
	{"zero width and BOM", "r\u200bm \ufeff", `r\u200bm \ufeff`},
	{"line separator", "a\u2028b\u2029c", `a\u2028b\u2029c`},
	{"tag characters", "ok\U000E0041", `ok\U000e0041`},
	{"hangul filler", "a\u3164b", `a\u3164b`},
	{"soft hyphen", "pass\u00adword", `pass\u00adword`},
	{"letters stay", "héllo wörld — 日本語 ✓ \ufffd \\n", "héllo wörld — 日本語 ✓ \ufffd \\n"},
}

func TestLine(t *testing.T) {
	t.Parallel()
	for _, c := range hostile {
		t.Run(c.name, func(t *testing.T) {
			if got := Line(c.in); got != c.line {
				t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
			}
		})
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"line 1\n\tline 2\n", "line 1\n\tline 2\n"},
		{"50%\r100%\n", `50%\r100%` + "\n"},
		{"\x1b[31mred\x1b[0m\n", `\x1b[31mred\x1b[0m` + "\n"},
		{"\u202eevil\n\xfe", `\u202eevil` + "\n" + `\xfe`},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		n    int
		want string
		cut  int
	}{
		{"short", 10, "short", 0},
		{"abcdef", 3, "abc…", 3},
		{"aé", 2, "a…", 2}, // never half a rune
		{"\x1b[2Jxyz", 4, `\x1b[2J…`, 3},
		{"abc", 0, "…", 3},
	} {
		got, cut := Clip(c.in, c.n)
		if got != c.want || cut != c.cut {
			t.Errorf("Clip(%q, %d) = %q, %d; want %q, %d", c.in, c.n, got, cut, c.want, c.cut)
		}
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	v := map[string]any{"argv": []any{"\x1b]52;c;eA==\x07", "\u202e", "\U000E0041\u0085", "ok é\n"}, "n": 1.5}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(raw)
	for _, bad := range []string{"\u202e", "\U000E0041", "\u0085"} {
		if bytes.Contains(got, []byte(bad)) {
			t.Errorf("JSON left %q raw: %s", bad, got)
		}
	}
	if !bytes.Contains(got, []byte(`"\u202e"`)) || !bytes.Contains(got, []byte(`\udb40\udc41\u0085`)) || !bytes.Contains(got, []byte("ok é")) {
		t.Errorf("JSON escaped otherwise than expected: %s", got)
	}
	var back any
	if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, v) {
		t.Errorf("JSON changed the value: %v %v", back, err)
	}
	if plain := []byte(`{"a": "b"}`); &JSON(plain)[0] != &plain[0] {
		t.Error("a safe document was copied")
	}
}

// FuzzRender: whatever the input, Line's output is valid UTF-8 with no
// unsafe character and no newline or tab; Text's has no unsafe character
// and exactly the input's newlines; JSON keeps a document's value.
func FuzzRender(f *testing.F) {
	for _, c := range hostile {
		f.Add(c.in)
	}
	f.Add(`{"a":"\u202e"}`)
	f.Fuzz(func(t *testing.T, s string) {
		l, txt := Line(s), Text(s)
		for _, out := range []string{l, txt} {
			if !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 out of %q: %q", s, out)
			}
			for _, r := range out {
				if Unsafe(r) {
					t.Fatalf("unsafe %U left in %q (from %q)", r, out, s)
				}
			}
		}
		if strings.ContainsAny(l, "\n\t") {
			t.Fatalf("Line kept a newline or tab: %q", l)
		}
		if strings.Count(txt, "\n") != strings.Count(s, "\n") {
			t.Fatalf("Text changed the lines of %q: %q", s, txt)
		}
		if utf8.ValidString(s) && !strings.ContainsAny(s, "\\") && safePrefix(s, false) == len(s) && l != s {
			t.Fatalf("safe %q rendered as %q", s, l)
		}
		// Any JSON string value survives JSON unchanged.
		doc, _ := json.Marshal(map[string]string{"s": s})
		var want, got map[string]string
		_ = json.Unmarshal(doc, &want)
		safe := JSON(doc)
		if err := json.Unmarshal(safe, &got); err != nil || got["s"] != want["s"] {
			t.Fatalf("JSON changed %q: %q (%v)", want["s"], got["s"], err)
		}
		for _, r := range string(safe) {
			if Unsafe(r) || r == '\n' {
				t.Fatalf("JSON left %U raw in %s", r, safe)
			}
		}
	})
}

var sink string

// BenchmarkLine: rendering a typical argument (plain ASCII, the fast path)
// and a hostile one, beside strconv.Quote, which escapes every control
// character and non-printable rune the way %q does.
func BenchmarkLine(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"plain", "git commit -m 'fix the flaky test in internal/host/audit' --author bot"},
		{"unicode", "écrire le fichier « données.txt » — 日本語のテキスト ✓"},
		{"hostile", "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\rls \u202efdp.exe\nhook Bash allow rm -rf /"},
	} {
		b.Run(c.name+"/Line", func(b *testing.B) {
			for b.Loop() {
				sink = Line(c.s)
			}
		})
		b.Run(c.name+"/strconv.Quote", func(b *testing.B) {
			for b.Loop() {
				sink = strconv.Quote(c.s)
			}
		})
	}
}
