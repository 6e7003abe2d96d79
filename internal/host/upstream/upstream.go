// Package upstream connects upstream MCP servers and offers their tools as
// plugin kind "mcp", each only with an approved, pinned definition:
//
//	plugins:
//	  gh:
//	    kind: mcp
//	    command: /usr/local/bin/github-mcp-server   # stdio; or an http(s):// URL
//	    args: [stdio]
//	    env: {GITHUB_TOKEN: "{{secret:gh}}"}        # for a URL: request headers
//	    timeout: 60s                                # per call
//
// Their tools are SERVER.TOOL. The tools a build returns come from the pins
// (HOME/pins.json), so building starts nothing; a server is started on its
// first call, and its live definitions are checked against the pins every
// time it (re)connects. One upstream process serves every agent, so its
// secrets must be granted to agents ["*"] and tools [SERVER].
//
// The connections live in a Pool, owned by the daemon and handed to builds
// through plugin.Env.Shared[Kind], so they outlive a reload and end with
// their owner.
package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/plugin"
	"github.com/toolgate/toolgate/internal/host/secrets"
)

func init() { plugin.Register(Kind, build) }

// Kind is the plugin kind of upstream MCP servers.
const Kind = "mcp"

// DefaultTimeout bounds one upstream call (and connecting).
const DefaultTimeout = time.Minute

// Pool keeps one connection per configured server across reloads: a reload
// with the same settings reuses the running process.
type Pool struct {
	pins *Pins

	mu      sync.Mutex
	servers map[string]*server
}

// NewPool returns an empty pool whose servers are checked against pins.
func NewPool(pins *Pins) *Pool { return &Pool{pins: pins, servers: map[string]*server{}} }

// Pins is the pool's pin store.
func (p *Pool) Pins() *Pins { return p.pins }

type server struct {
	name    string
	cfg     config.Plugin
	digest  [32]byte
	secrets *secrets.Store
	pins    *Pins
	timeout time.Duration

	mu   sync.Mutex
	sess *sdk.ClientSession
	live map[string]string // tool → hash of its live definition, at connect
	// relist is a session whose server announced that its tools changed:
	// live no longer says what it offers, so the next call reconnects and
	// checks the definitions against the pins again.
	relist atomic.Pointer[sdk.ClientSession]
}

func build(name string, p config.Plugin, env plugin.Env) ([]gateway.Tool, error) {
	pool, ok := env.Shared[Kind].(*Pool)
	if !ok {
		return nil, errors.New("no upstream pool to build on (the daemon passes one)")
	}
	u, err := pool.server(name, p, env)
	if err != nil {
		return nil, err
	}
	all, err := u.pins.All()
	if err != nil {
		return nil, err
	}
	var tools []gateway.Tool
	for _, key := range slices.Sorted(maps.Keys(all)) {
		tool, ok := strings.CutPrefix(key, name+".")
		if pin := all[key]; ok && pin.Hash != "" {
			tools = append(tools, &upstreamTool{u: u, name: key, tool: tool, pin: pin})
		}
	}
	return tools, nil
}

// checkSettings refuses settings no upstream server can run with.
func checkSettings(p config.Plugin, env plugin.Env) error {
	isURL := strings.HasPrefix(p.Command, "http://") || strings.HasPrefix(p.Command, "https://")
	switch {
	case p.Command == "":
		return errors.New("command: an absolute host path or an http(s):// URL is required")
	case !isURL && !filepath.IsAbs(p.Command):
		return fmt.Errorf("command: %q is neither an absolute host path nor an http(s):// URL", p.Command)
	case p.Cwd == "workspace":
		return errors.New("cwd: an upstream MCP server is shared by all agents; it cannot run in one agent's workspace")
	case p.Timeout < 0:
		return errors.New("timeout: must not be negative")
	}
	return plugin.CheckSecrets(p, env)
}

// server checks the settings and returns the server's shared state.
func (pool *Pool) server(name string, p config.Plugin, env plugin.Env) (*server, error) {
	if err := checkSettings(p, env); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(p)
	digest := sha256.Sum256(b)
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if u := pool.servers[name]; u != nil && u.digest == digest {
		u.mu.Lock()
		u.secrets = env.Secrets
		u.mu.Unlock()
		return u, nil
	} else if u != nil {
		u.close()
	}
	u := &server{name: name, cfg: p, digest: digest, secrets: env.Secrets, pins: pool.pins, timeout: p.Timeout}
	if u.timeout == 0 {
		u.timeout = DefaultTimeout
	}
	pool.servers[name] = u
	return u, nil
}

// Prune closes the connection (and so the process) of every upstream server
// that cfg no longer declares, e.g. after a reload; nil closes them all.
// Their secrets must not outlive their configuration.
func (pool *Pool) Prune(cfg *config.Config) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for name, u := range pool.servers {
		if cfg != nil && cfg.Plugins[name].Kind == Kind {
			continue
		}
		u.close()
		delete(pool.servers, name)
	}
}

// Close ends every connection.
func (pool *Pool) Close() { pool.Prune(nil) }

func (u *server) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != nil {
		_ = u.sess.Close()
		u.sess = nil
	}
}

// drop forgets a session that failed, so the next call starts afresh.
func (u *server) drop(s *sdk.ClientSession) {
	u.mu.Lock()
	if u.sess == s {
		u.sess = nil
	}
	u.mu.Unlock()
	_ = s.Close()
}

func (u *server) secret(name string) (string, error) { return u.secrets.Resolve("*", u.name, name) }

func (u *server) transport() (sdk.Transport, error) {
	vars := map[string]string{}
	for k, v := range u.cfg.Env {
		x, err := secrets.Expand(v, u.secret)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		vars[k] = x
	}
	if strings.HasPrefix(u.cfg.Command, "http://") || strings.HasPrefix(u.cfg.Command, "https://") {
		hdr := http.Header{}
		for k, v := range vars {
			hdr.Set(k, v)
		}
		return &sdk.StreamableClientTransport{Endpoint: u.cfg.Command,
			HTTPClient: &http.Client{Transport: headerTransport{hdr, http.DefaultTransport}}}, nil
	}
	cmd := exec.Command(u.cfg.Command, u.cfg.Args...)
	home, _ := os.UserHomeDir()
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + home}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		cmd.Env = append(cmd.Env, k+"="+vars[k])
	}
	if u.cfg.Cwd != "" {
		cmd.Dir = u.cfg.Cwd
	}
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil
}

type headerTransport struct {
	hdr  http.Header
	next http.RoundTripper
}

// maxUpstreamJSON bounds one JSON answer of an HTTP upstream, which the SDK
// reads whole into memory; a stdio frame and an SSE event have the SDK's
// own bound, of the same size.
const maxUpstreamJSON = sdk.DefaultMaxLineLength

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.hdr {
		r.Header[k] = v
	}
	resp, err := h.next.RoundTrip(r)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxUpstreamJSON}
	}
	return resp, err
}

// boundedBody fails a read past its bound instead of buffering a hostile
// upstream's endless answer.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("upstream answer over %d bytes", maxUpstreamJSON)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte more tells "exactly the bound" from "over it"
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, fmt.Errorf("upstream answer over %d bytes", maxUpstreamJSON)
	}
	return n, err
}

// session returns the live session, connecting (and checking every tool's
// definition against its pin) when there is none.
func (u *server) session(ctx context.Context) (*sdk.ClientSession, map[string]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != nil && u.relist.Load() == u.sess {
		_ = u.sess.Close()
		u.sess = nil
	}
	if u.sess != nil {
		return u.sess, u.live, nil
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	sess, defs, err := connectUpstream(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	live := map[string]string{}
	for tool, def := range defs {
		key := u.name + "." + tool
		live[tool] = def.Hash(key)
		if _, err := u.pins.Observe(key, def); err != nil {
			_ = sess.Close()
			return nil, nil, fmt.Errorf("recording %s in the pins: %w", key, err)
		}
	}
	u.sess, u.live = sess, live
	return sess, live, nil
}

func connectUpstream(ctx context.Context, u *server) (*sdk.ClientSession, map[string]ToolDef, error) {
	t, err := u.transport()
	if err != nil {
		return nil, nil, err
	}
	// Only noted here: the handler runs on the session's reader, which
	// must not wait for u.mu (held while connecting).
	client := sdk.NewClient(&sdk.Implementation{Name: "toolgate", Version: "upstream"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, req *sdk.ToolListChangedRequest) { u.relist.Store(req.Session) },
	})
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("upstream %s: connecting: %w", u.name, err)
	}
	defs := map[string]ToolDef{}
	for tool, err := range sess.Tools(ctx, nil) {
		if err != nil {
			_ = sess.Close()
			return nil, nil, fmt.Errorf("upstream %s: listing tools: %w", u.name, err)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		defs[tool.Name] = ToolDef{Description: tool.Description, InputSchema: schema}
	}
	return sess, defs, nil
}

// ToolStatus is one upstream tool as `toolgate tools list` shows it.
type ToolStatus struct {
	Name   string // SERVER.TOOL
	Status string // pinned, changed, new, gone
	Def    ToolDef
}

// Inspect connects to an upstream, records what it offers in the pins and
// reports every tool's status. It is the CLI's way of seeing a server the
// daemon has not started yet.
func Inspect(ctx context.Context, name string, p config.Plugin, env plugin.Env, pins *Pins) ([]ToolStatus, error) {
	u := &server{name: name, cfg: p, secrets: env.Secrets, pins: pins}
	sess, defs, err := connectUpstream(ctx, u)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	all, err := pins.All()
	if err != nil {
		return nil, err
	}
	var out []ToolStatus
	for tool, def := range defs {
		key := name + "." + tool
		ok, err := pins.Observe(key, def)
		if err != nil {
			return nil, err
		}
		st := ToolStatus{Name: key, Status: "pinned", Def: def}
		if !ok {
			st.Status = "new"
			if all[key].Hash != "" {
				st.Status = "changed"
			}
		}
		out = append(out, st)
	}
	for key, pin := range all {
		if tool, ok := strings.CutPrefix(key, name+"."); ok && pin.Hash != "" {
			if _, live := defs[tool]; !live {
				out = append(out, ToolStatus{Name: key, Status: "gone", Def: pin.Def})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// upstreamTool is one approved tool of an upstream server.
type upstreamTool struct {
	u    *server
	name string // SERVER.TOOL
	tool string // TOOL, as the upstream calls it
	pin  Pin    // as approved when the snapshot was built
}

func (t *upstreamTool) Name() string        { return t.name }
func (t *upstreamTool) Kind() gateway.Kind  { return gateway.KindTool }
func (t *upstreamTool) Description() string { return t.pin.Def.Description }
func (t *upstreamTool) Schema() string      { return string(t.pin.Def.InputSchema) }

// RulePin is the rule under which a call of an upstream tool whose
// approved definition is not the live one is denied.
const RulePin = "upstream.pin"

// Withheld says why the tool may not be offered or called now, as far as
// the pins know: its live definition was seen to differ from the approved
// one (or the approval changed since this configuration was built).
func (t *upstreamTool) Withheld() error {
	pin, ok, err := t.u.pins.Get(t.name)
	switch {
	case err != nil:
		return &gateway.Refusal{Rule: RulePin, Reason: fmt.Sprintf("pins unreadable: %v", err)}
	case !ok || pin.Hash == "":
		return &gateway.Refusal{Rule: RulePin, Reason: fmt.Sprintf("%s is no longer approved", t.name)}
	case pin.Hash != t.pin.Hash:
		return &gateway.Refusal{Rule: RulePin, Reason: fmt.Sprintf("%s was re-approved with a new definition; reload the gateway to offer it", t.name)}
	case pin.Seen != nil:
		return t.changed()
	}
	return nil
}

func (t *upstreamTool) changed() *gateway.Refusal {
	return &gateway.Refusal{Rule: RulePin,
		Reason: fmt.Sprintf("%s changed upstream and is withheld until `toolgate tools approve %s`", t.name, t.name)}
}

// Admit checks the live definition against the approved one before the
// call's decision is recorded, connecting (and listing the upstream's
// tools) when there is no session yet: the first call after a restart or a
// reconnect is denied under RulePin like every later one, not allowed and
// then failed. A server it cannot reach admits the call, whose run then
// fails with the reason.
func (t *upstreamTool) Admit(ctx context.Context, _ *gateway.Call) *gateway.Refusal {
	_, live, err := t.u.session(ctx)
	if err != nil {
		return nil
	}
	if h, ok := live[t.tool]; !ok {
		return &gateway.Refusal{Rule: RulePin, Reason: fmt.Sprintf("%s is no longer offered by its upstream server", t.name)}
	} else if h != t.pin.Hash {
		return t.changed()
	}
	return nil
}

// Prepare checks that the arguments are one JSON object and that the tool
// is not withheld; the upstream validates them against its schema.
func (t *upstreamTool) Prepare(call *gateway.Call, _ gateway.AgentInfo) error {
	if call.Via == "socket" { // a launcher in the sandbox: its command line becomes the arguments
		args, err := argsFromArgv(call.Args)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		call.Args = args
	}
	if err := decodeObject(call.Args); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	return t.Withheld()
}

func decodeObject(raw json.RawMessage) error {
	if !utf8.Valid(raw) {
		return errors.New("arguments contain invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return errors.New("arguments must be a JSON object")
	}
	if dec.More() {
		return errors.New("unexpected data after the arguments object")
	}
	return nil
}

// Run calls the upstream. A crash or a dead connection fails this call and
// makes the next one reconnect; a call that takes too long is abandoned at
// the plugin's timeout. Either way other tools and servers are unaffected.
func (t *upstreamTool) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	sess, live, err := t.u.session(ctx)
	if err != nil {
		return nil, err
	}
	if live[t.tool] != t.pin.Hash { // it changed since Admit (tools/list_changed)
		return nil, t.changed()
	}
	ctx, cancel := context.WithTimeout(ctx, t.u.timeout)
	defer cancel()
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: t.tool, Arguments: call.Args})
	if err != nil {
		var rpc *jsonrpc.Error
		if ctx.Err() != nil {
			return nil, fmt.Errorf("upstream %s: no answer within %s", t.u.name, t.u.timeout)
		}
		if !errors.As(err, &rpc) {
			t.u.drop(sess)
		}
		return nil, fmt.Errorf("upstream %s: %w", t.u.name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	out := &gateway.Result{Output: t.u.secrets.Redact(strings.Join(text, "\n"))}
	if env != nil && env.IO != nil && env.IO.Stdout != nil { // a launcher prints what it gets
		if s, _ := out.Output.(string); s != "" {
			_, _ = io.WriteString(env.IO.Stdout, s+"\n")
		}
	}
	code := 0
	if res.IsError {
		code = 1
		out.Error = "upstream tool reported an error"
	}
	out.ExitCode = &code
	return out, nil
}
