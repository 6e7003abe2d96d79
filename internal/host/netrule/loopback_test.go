package netrule

import "testing"

func TestLoopback(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"localhost:8080": true, "LOCALHOST:1": true, "api.localhost:443": true, "127.0.0.1:80": true,
		"127.9.9.9:80": true, "[::1]:80": true, "[::ffff:127.0.0.1]:80": true, "2130706433:80": true,
		"example.com:443": false, "localhost.example.com:443": false, "10.0.0.1:80": false, "[::]:80": false,
		"notlocalhost:80": false,
	} {
		tg, err := ParseTarget(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if tg.Loopback() != want {
			t.Errorf("target %s: Loopback = %v, want %v", s, !want, want)
		}
		r, err := ParseRule(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if r.Loopback() != want {
			t.Errorf("rule %s: Loopback = %v, want %v", s, !want, want)
		}
	}
}
