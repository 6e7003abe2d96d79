package proto

import "testing"

func TestHostLoopbackRoutes(t *testing.T) {
	t.Parallel()
	l := ParseHostLoopback("localhost:8080, 127.0.0.1:9000,[::1]:7000,*.app.localhost:80,garbage")
	for target, want := range map[string]bool{
		"localhost:8080": true, "LOCALHOST:8080": true, "localhost.:8080": true, "127.0.0.1:9000": true, "[::1]:7000": true,
		"web.app.localhost:80": true, "example.com:443": true, "10.0.0.1:80": true, "not a target": true,
		"localhost:8081": false, "127.0.0.1:8080": false, "127.0.0.2:9000": false, "[::1]:8080": false,
		"app.localhost:80": false, "api.localhost:443": false, "[::ffff:127.0.0.1]:3129": false,
	} {
		if got := l.Routes(target); got != want {
			t.Errorf("Routes(%q) = %v, want %v", target, got, want)
		}
	}
	if !(HostLoopback{}).Routes("example.com:443") || (HostLoopback{}).Routes("127.0.0.1:3129") {
		t.Error("an empty list keeps loopback in the sandbox and sends the rest to the gateway")
	}
}
