package netrule

import (
	"strings"
	"testing"
)

func TestParseRuleValid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Rule
		str  string
	}{
		{"api.github.com:443", Rule{Host: "api.github.com", Port: 443}, "api.github.com:443"},
		{"PyPI.org.:443", Rule{Host: "pypi.org", Port: 443}, "pypi.org:443"},
		{"*.pythonhosted.org:443", Rule{Host: "pythonhosted.org", Wildcard: true, Port: 443}, "*.pythonhosted.org:443"},
		{"*.Bücher.example:443", Rule{Host: "xn--bcher-kva.example", Wildcard: true, Port: 443}, "*.xn--bcher-kva.example:443"},
		{"*.co.uk:443", Rule{Host: "co.uk", Wildcard: true, Port: 443}, "*.co.uk:443"},
		{"10.0.0.5:5432", Rule{Host: "10.0.0.5", Port: 5432}, "10.0.0.5:5432"},
		{"0x0a000005:5432", Rule{Host: "10.0.0.5", Port: 5432}, "10.0.0.5:5432"},
		{"[2001:DB8::1]:22", Rule{Host: "2001:db8::1", Port: 22}, "[2001:db8::1]:22"},
	}
	for _, c := range cases {
		got, err := ParseRule(c.in)
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("ParseRule(%q) = %+v (%s), %v; want %+v", c.in, got, got, err, c.want)
		}
	}
}

func TestParseRuleInvalid(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, why string }{
		{"*:443", "bare *"},
		{"*", "missing port"},
		{"*.com:443", "single-label suffix"},
		{"*.com.:443", "single-label suffix"},
		{"*.10.0.0.1:443", "wildcard over an IP"},
		{"*.0x0a000001:443", "wildcard over an IP"},
		{"*.[::1]:443", "brackets"},
		{"*.1.2:443", "wildcard over an IP"},
		{"**.example.com:443", "only allowed as a leading"},
		{"*example.com:443", "only allowed as a leading"},
		{"a.*.example.com:443", "only allowed as a leading"},
		{"example.*:443", "only allowed as a leading"},
		{"*.:443", "empty host"},
		{"api.github.com", "missing port"},
		{"*.pythonhosted.org", "missing port"},
		{"api.github.com:", "missing port"},
		{"api.github.com:0", "invalid port"},
		{"api.github.com:70000", "out of range"},
		{"api.github.com:https", "invalid port"},
		{"user@api.github.com:443", "userinfo"},
		{strings.Repeat("a", 300) + ".com:443", "label longer"},
	}
	for _, c := range cases {
		_, err := ParseRule(c.in)
		if err == nil || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), c.in) {
			t.Errorf("ParseRule(%q) error %v; want one naming the rule and saying %q", c.in, err, c.why)
		}
	}
}

func TestRuleMatch(t *testing.T) {
	t.Parallel()
	rules, err := ParseRules([]string{"api.github.com:443", "*.pythonhosted.org:443", "10.0.0.5:5432"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		target string
		rule   int // index of the matching rule, -1 for none
	}{
		{"api.github.com:443", 0},
		{"API.GitHub.com.:443", 0},
		{"api.github.com:22", -1}, // ports are part of the rule
		{"github.com:443", -1},
		{"evil-api.github.com:443", -1},
		{"files.pythonhosted.org:443", 1},
		{"a.b.pythonhosted.org:443", 1},
		{"pythonhosted.org:443", -1}, // strict subdomains only
		{"evilpythonhosted.org:443", -1},
		{"files.pythonhosted.org.evil.example:443", -1},
		{"files.pythonhosted.org:80", -1},
		{"10.0.0.5:5432", 2},
		{"012.0.0.5:5432", 2}, // octal spelling of the same address
		{"167772165:5432", 2},
		{"[::ffff:10.0.0.5]:5432", 2},
		{"10.0.0.6:5432", -1},
	}
	for _, c := range cases {
		tg, err := ParseTarget(c.target)
		if err != nil {
			t.Fatal(err)
		}
		got := -1
		for i, r := range rules {
			if r.Match(tg) {
				got = i
				break
			}
		}
		if got != c.rule {
			t.Errorf("%s matched rule %d, want %d", c.target, got, c.rule)
		}
	}
}

func TestParseRulesReportsEveryError(t *testing.T) {
	t.Parallel()
	rules, err := ParseRules([]string{"ok.example:443", "*:443", "*.com:443", "missing.port"})
	if len(rules) != 1 || rules[0].Host != "ok.example" {
		t.Errorf("rules = %+v", rules)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 3 {
		t.Errorf("want 3 joined errors, got %v", err)
	}
	if rules, err := ParseRules(nil); len(rules) != 0 || err != nil {
		t.Errorf("empty list: %v, %v", rules, err)
	}
}
