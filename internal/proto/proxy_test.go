package proto

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

func TestProxyCallID(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct{ auth, want string }{
		{"Basic " + b64("call-18ecaa9a0c1c8d4a:x"), "18ecaa9a0c1c8d4a"},
		{"basic " + b64("call-abc_DEF-1:"), "abc_DEF-1"},
		{"Basic " + b64("call-abc"), "abc"},
		{"Basic " + b64("abc:x"), ""},
		{"Basic " + b64("call-:x"), ""},
		{"Basic " + b64("call-../../etc:x"), ""},
		{"Basic " + b64("call-a\nb:x"), ""},
		{"Basic " + b64("call-"+strings.Repeat("a", 200)+":x"), ""},
		{"Bearer " + b64("call-abc:x"), ""},
		{"Basic !!!", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := ProxyCallID(tt.auth); got != tt.want {
			t.Errorf("ProxyCallID(%q) = %q, want %q", tt.auth, got, tt.want)
		}
	}
}

// Whatever credentials a process sends, the parent is a safe call id or nothing.
func FuzzProxyCallID(f *testing.F) {
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("call-abc:x")))
	f.Add("Basic Y2FsbC0uLi86eA==")
	f.Add("basic")
	f.Fuzz(func(t *testing.T, auth string) {
		p := ProxyCallID(auth)
		if p != "" && (len(p) > 128 || strings.ContainsAny(p, "/.:\r\n\x00 ")) {
			t.Fatalf("ProxyCallID(%q) = %q", auth, p)
		}
	})
}

// What the host puts in a call's proxy variables is what the forwarder
// reads back from the Proxy-Authorization a client derives from it.
func TestProxyURLRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"18ecaa9a0c1c8d4a", "abc_DEF-1"} {
		u, err := url.Parse(ProxyURL(id))
		if err != nil || u.Host != ProxyAddr {
			t.Fatalf("ProxyURL(%q) = %q: %v", id, ProxyURL(id), err)
		}
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.String()))
		if got := ProxyCallID(auth); got != id {
			t.Errorf("ProxyCallID(credential of %q) = %q", id, got)
		}
	}
	if u := ProxyURL(""); u != "http://"+ProxyAddr {
		t.Errorf("unattributed ProxyURL = %q", u)
	}
}
