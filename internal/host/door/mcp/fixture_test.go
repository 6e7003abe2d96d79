package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/coretools"
	"github.com/toolgate/toolgate/internal/host/door/adminapi"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/gateway/gatewaytest"
	"github.com/toolgate/toolgate/internal/host/plugin"
	"github.com/toolgate/toolgate/internal/host/policy"
	"github.com/toolgate/toolgate/internal/host/upstream"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// testConfig: agent a has echo and no patch, and a rule denying "forbidden";
// agent b has only the core tools.
const testConfig = `
plugins:
  echo: {kind: builtin, builtin: toolgate-echo}
agents:
  a:
    tools: [echo]
    core: {patch: false}
    rules:
      - {name: no-forbidden, deny: '"forbidden" in argv', reason: forbidden words stay out}
  b: {}
`

type fixture struct {
	home    string
	cfg     *config.Config
	gw      *gateway.Gateway
	sandbox *gatewaytest.Sandbox
	tokens  *auth.Store
	door    *Door
	audit   *audit.Writer
	srv     *httptest.Server
	url     string // the MCP route
	pool    *upstream.Pool
}

// newFixture runs the real pipeline (config, policy, core tools over a fake
// sandbox, the builtin echo plugin, a real audit log) behind the door on
// the host route: /mcp behind the token middleware, /v1/ the admin API.
func newFixture(t testing.TB, cfgYAML string, opts Options) *fixture {
	t.Helper()
	return newFixtureOn(t, cfgYAML, opts, newPool(t))
}

// newPool is a pool of upstream connections on pins of its own, closed
// when the test ends. Fixtures sharing one are a daemon across reloads.
func newPool(t testing.TB) *upstream.Pool {
	t.Helper()
	pins, err := upstream.OpenPins(filepath.Join(t.TempDir(), upstream.PinsFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := upstream.NewPool(pins)
	t.Cleanup(pool.Close)
	return pool
}

// newFixtureOn is newFixture with upstream MCP servers connected by pool.
func newFixtureOn(t testing.TB, cfgYAML string, opts Options, pool *upstream.Pool) *fixture {
	t.Helper()
	home := t.TempDir()
	cfg, err := config.Parse(home, "c.yaml", []byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	snap := buildSnapshot(t, cfg, pool)
	aw, err := audit.Open(filepath.Join(home, "logs"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aw.Close() })
	f := &fixture{home: home, cfg: cfg, sandbox: &gatewaytest.Sandbox{}, audit: aw, pool: pool}
	f.gw = gateway.New(gateway.Options{Audit: aw, Sandboxes: f.sandbox}, snap)
	f.tokens, err = auth.OpenStore(filepath.Join(home, auth.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	if opts.Home == "" {
		opts.Home = home
	}
	if opts.Generation == nil {
		opts.Generation = pool.Pins().Generation
	}
	if opts.Visible == nil {
		opts.Visible = VisibleFromConfig(func() *config.Config { return f.cfg })
	}
	f.door = New(f.gw, opts)
	t.Cleanup(func() { f.door.Close() })
	mux := http.NewServeMux()
	mux.Handle("/mcp", auth.Require(f.tokens, auth.ScopeMCP, RouteOptions(nil))(f.door.Handler(TokenIdentity)))
	api := &adminapi.Server{Gateway: f.gw, Tokens: f.tokens,
		Status: func(context.Context) ([]api.AgentStatus, error) { return nil, nil }}
	mux.Handle("/v1/", api.Handler())
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	f.url = f.srv.URL + "/mcp"
	return f
}

func buildSnapshot(t testing.TB, cfg *config.Config, pool *upstream.Pool) *gateway.Snapshot {
	t.Helper()
	eng, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := plugin.Build(cfg, plugin.Env{Shared: map[string]any{upstream.Kind: pool}})
	if err != nil {
		t.Fatal(err)
	}
	snap := &gateway.Snapshot{Agents: map[string]gateway.AgentInfo{}, Tools: tools, Decider: upstreamAllowlist{eng, cfg}}
	for name := range cfg.Agents {
		snap.Agents[name] = gateway.AgentInfo{Name: name, Workspace: "/workspace", HostDir: t.TempDir()}
	}
	for _, ct := range coretools.New(nil, nil) {
		snap.Tools[ct.Name()] = ct
	}
	return snap
}

// upstreamAllowlist stands in for what policy does not do yet: an agent
// whose allowlist names upstream server S may call S.TOOL. The call is
// decided by the real engine as a call of S, so the rules still apply.
type upstreamAllowlist struct {
	eng *policy.Engine
	cfg *config.Config
}

func (u upstreamAllowlist) Decide(call *gateway.Call) gateway.Decision {
	if i := strings.LastIndexByte(call.Tool, '.'); i > 0 && u.cfg.Plugins[call.Tool[:i]].Kind == upstream.Kind {
		c := *call
		c.Tool = call.Tool[:i]
		return u.eng.Decide(&c)
	}
	return u.eng.Decide(call)
}

func (f *fixture) token(t testing.TB, scope auth.Scope, agent string) string {
	t.Helper()
	secret, _, err := f.tokens.Create(scope, agent, 0)
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// connect opens an MCP session with the SDK client, as bearer secret.
func (f *fixture) connect(t testing.TB, secret string, copts *sdk.ClientOptions) (*sdk.ClientSession, error) {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, copts)
	tr := &sdk.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{secret, http.DefaultTransport}}}
	cs, err := client.Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func (f *fixture) mustConnect(t testing.TB, secret string) *sdk.ClientSession {
	t.Helper()
	cs, err := f.connect(t, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// auditEntries returns the audit log's entries of one tool.
func (f *fixture) auditEntries(t testing.TB, tool string) []*gateway.Entry {
	t.Helper()
	var out []*gateway.Entry
	err := audit.Query(filepath.Join(f.home, "logs"), audit.Filter{Tool: tool}, func(e *gateway.Entry) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type bearer struct {
	secret string
	next   http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.secret != "" {
		r.Header.Set("Authorization", "Bearer "+b.secret)
	}
	return b.next.RoundTrip(r)
}

func toolNames(t testing.TB, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}
