package netrule

import (
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	"example.com:443", "Bücher.example.:443", "2852039166:80", "0251.0376.0251.0376:80", "0xa9fea9fe:80",
	"127.1:22", "[::ffff:169.254.169.254]:80", "[64:ff9b::a9fe:a9fe]:80", "[fe80::1%eth0]:80",
	"user@host:1", "*.pythonhosted.org:443", "*.com:443", "*:443", "host", "[::1]", "a..b:1",
	"münchen\u3002de:443", "0x:1", "1.2.3.4.5:6",
}

// Whatever ParseTarget accepts is normalised: lowercase ASCII within DNS
// limits, and its canonical form parses back to itself.
func FuzzParseTarget(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if tg.Port == 0 || tg.Host == "" || len(tg.Host) > maxNameLen || strings.ContainsAny(tg.Host, "@%[] ") {
			t.Fatalf("ParseTarget(%q) = %+v", s, tg)
		}
		if !tg.IsIP() {
			for _, l := range strings.Split(tg.Host, ".") {
				if l == "" || len(l) > maxLabelLen || strings.ToLower(l) != l {
					t.Fatalf("ParseTarget(%q): bad label %q", s, l)
				}
				for i := 0; i < len(l); i++ {
					if !isHostByte(l[i]) {
						t.Fatalf("ParseTarget(%q): byte %q in %q", s, l[i], tg.Host)
					}
				}
			}
		} else if tg.Addr.Is4In6() || tg.Addr.Zone() != "" || tg.Addr.String() != tg.Host {
			t.Fatalf("ParseTarget(%q): address %v host %q", s, tg.Addr, tg.Host)
		}
		again, err := ParseTarget(tg.String())
		if err != nil || again != tg {
			t.Fatalf("ParseTarget(%q) = %+v; canonical %q gives %+v, %v", s, tg, tg.String(), again, err)
		}
	})
}

// Whatever ParseRule accepts round-trips, and a wildcard never covers an IP
// or a single label.
func FuzzParseRule(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			if !strings.Contains(err.Error(), "egress rule") {
				t.Fatalf("error does not name the rule: %v", err)
			}
			return
		}
		if r.Wildcard && (!strings.Contains(r.Host, ".") || strings.Contains(r.Host, ":") || isNumericLabel(r.Host[strings.LastIndexByte(r.Host, '.')+1:])) {
			t.Fatalf("ParseRule(%q) = %+v", s, r)
		}
		again, err := ParseRule(r.String())
		if err != nil || again != r {
			t.Fatalf("ParseRule(%q) = %+v; canonical %q gives %+v, %v", s, r, r.String(), again, err)
		}
	})
}
