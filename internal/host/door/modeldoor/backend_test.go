package modeldoor

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/egress"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/fakeprovider"
)

// Upstreams are dialled by the egress guard: a metadata address is refused
// even with private: allow, a private one without it; the request never
// leaves.
func TestUpstreamThroughTheGuard(t *testing.T) {
	fake := fakeprovider.New(t)
	for _, c := range []struct {
		url, private, want string
	}{
		{"http://169.254.169.254/", "allow", "cloud metadata address"},
		{fake.URL, "deny", "private destinations are not allowed"},
	} {
		b, err := newHTTPBackend("p", config.ModelProvider{URL: c.url, Private: c.private}, Env{Egress: egress.Options{DialTimeout: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(context.Background(), "POST", "/v1/messages", strings.NewReader(`{}`))
		if _, err := b.Do(req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (private %s): %v", c.url, c.private, err)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("the fake was reached %d times", n)
	}
}
