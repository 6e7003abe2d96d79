package modeldoor

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/egress"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// Backend serves one provider's requests: the remote API over HTTP (kind
// http), or whatever another kind registers (canned turns served by
// toolgate itself, say). The door has already decided, recorded and added
// the credential; the backend only answers.
type Backend interface {
	// Do sends req, whose URL holds the path as the provider's base URL
	// ends it (/v1/messages), and returns the answer, its body streaming.
	// It honours req.Context().
	Do(req *http.Request) (*http.Response, error)
}

// Env is what a backend factory may use.
type Env struct {
	Egress egress.Options // the guard's resolver and NAT64 prefixes
}

// Factory builds the backend of provider name.
type Factory func(name string, p config.ModelProvider, env Env) (Backend, error)

var (
	kindsMu sync.RWMutex
	kinds   = map[string]Factory{}
)

// Register makes a provider kind available (from an init function): adding
// a kind is adding a file; the door never switches on kinds.
func Register(kind string, f Factory) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[kind]; dup {
		panic("modeldoor: kind " + kind + " registered twice")
	}
	kinds[kind] = f
}

// Kinds lists the registered provider kinds.
func Kinds() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	return slices.Sorted(maps.Keys(kinds))
}

func factory(kind string) (Factory, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	f, ok := kinds[kind]
	return f, ok
}

func init() { Register(config.DefaultModelKind, newHTTPBackend) }

// httpBackend forwards to a remote API. Its connections go through the
// egress guard: the host is resolved once per connection, the answer vetted
// (no metadata; no private address unless the provider allows it) and only
// those addresses dialled.
type httpBackend struct {
	base *url.URL
	tr   *http.Transport
}

func newHTTPBackend(name string, p config.ModelProvider, env Env) (Backend, error) {
	base, err := url.Parse(p.URL)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("model provider %s: url %q is not a base URL", name, p.URL)
	}
	port := base.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[base.Scheme]
	}
	target, err := netrule.ParseTarget(net.JoinHostPort(base.Hostname(), port))
	if err != nil {
		return nil, fmt.Errorf("model provider %s: %w", name, err)
	}
	rule, err := netrule.ParseRule(target.String())
	if err != nil {
		return nil, fmt.Errorf("model provider %s: %w", name, err)
	}
	guard := egress.NewGuard(netrule.Policy{Allow: []netrule.Rule{rule}, AllowPrivate: p.Private == "allow"}, env.Egress)
	tr := &http.Transport{
		Proxy: nil, // the guard dials; a proxy would resolve again
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, _, err := guard.Dial(ctx, target)
			return conn, err
		},
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		// Compressed answers are decompressed here, so the door reads usage
		// from plain bytes; the client gets them plain too.
		DisableCompression: false,
	}
	return &httpBackend{base: base, tr: tr}, nil
}

func (b *httpBackend) Do(req *http.Request) (*http.Response, error) {
	u := *b.base
	u.Path = strings.TrimSuffix(b.base.Path, "/") + req.URL.Path
	u.RawPath = ""
	u.RawQuery = req.URL.RawQuery
	req.URL, req.Host = &u, ""
	return b.tr.RoundTrip(req)
}

// retryAfter reads a Retry-After header (seconds or an HTTP date) as seconds.
func retryAfter(h http.Header) (float64, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
		return n, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t).Seconds(), 0), true
	}
	return 0, false
}
