// Package daemon is `toolgate serve`, the gateway's composition root: it
// wires configuration (assemble), audit, the sandbox backend, the gateway
// and its doors together as an ordered list of services (Start), serves
// the admin API, and reloads on SIGHUP without dropping calls in flight.
// It depends on the world; only the gateway's commands (gatewaycmd) and
// the tests of a whole gateway (systemtest, the kubernetes backend's)
// import it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auditpg"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/connlimit"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/hookserver"
	"github.com/toolgate/toolgate/internal/host/door/mcp"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/host/kubeagents"
	"github.com/toolgate/toolgate/internal/host/metrics"
	"github.com/toolgate/toolgate/internal/host/ratelimit"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/kube"
	"github.com/toolgate/toolgate/internal/host/session"
	"github.com/toolgate/toolgate/internal/host/tracing"
	"github.com/toolgate/toolgate/internal/host/upstream"
	"github.com/toolgate/toolgate/internal/host/witness"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// Options locate the daemon's configuration.
type Options struct {
	Home       string
	ConfigPath string // default HOME/config.yaml
	Logger     *slog.Logger
	// Ready, when set, is called once the admin API is listening.
	Ready func()
	// RemoveOnExit removes the agents' sandboxes when the daemon stops
	// (serve --rm; gateway.sandbox.removeOnExit does the same).
	RemoveOnExit bool
}

// Daemon is a running gateway: the parts Start wired, and what a reload
// changes.
type Daemon struct {
	opts Options
	log  *slog.Logger
	// services are the parts Start started, which Shutdown stops in reverse.
	services services

	mu      sync.Mutex // guards built and extras across reloads
	built   *assemble.Built
	reloads sync.Mutex // serialises reloads: SIGHUP's and the Agent controller's
	// extras are the Agent resources this gateway serves beside the
	// file's agents; agents is their controller, nil without the
	// kubernetes backend or with its agents: false.
	extras []config.Extra
	agents *kubeagents.Controller

	// What outlives a reload: the upstream MCP servers' connections, the
	// model spending, the agents' rate limits (a config change does not
	// reset a budget), the secrets the audit log redacts.
	upstreams *upstream.Pool
	meter     *modeldoor.Meter
	rates     *ratelimit.Limiter
	bounder   *audit.Bounder

	// sandboxes is the backend gateway.sandbox.backend chose; kube is it
	// when that is kubernetes.
	sandboxes sandbox.Backend
	kube      *kube.Manager
	client    string
	// upDone is closed once each sandbox of the start is up or failed.
	upDone chan struct{}

	gw        *gateway.Gateway
	audit     *audit.Writer
	keys      *identity.Keys    // sign the audit log's checkpoints
	cosigner  *witness.Cosigner // sends them to the witnesses; nil without any
	index     *auditindex.Index // follows the audit log for queries (calls never wait for it)
	fleet     *auditpg.Store    // copies it into the fleet's Postgres; nil when not configured
	tracer    *tracing.Tracer   // exports a trace of each call; nil: off
	metrics   *metrics.Metrics  // at /metrics on the admin socket and TCP listener
	approvals *approval.Store   // the calls waiting for a person
	sessions  *session.Tracker  // the labels each session's calls gave it, rebuilt from the log at start
	tokens    *auth.Store
	conns     connlimit.Budget

	// The doors on the agent sockets and the admin API.
	sock   *agentsock.Server
	models *modeldoor.Door
	hooks  *hookserver.Server
	door   *mcp.Door
}

// Run starts the gateway and serves until ctx ends or SIGTERM/SIGINT arrives.
func Run(ctx context.Context, opts Options) error {
	d, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	for {
		select {
		case <-ctx.Done():
			return d.Shutdown(context.Background())
		case s := <-sigs:
			if s == syscall.SIGHUP {
				if _, err := d.Reload(ctx); err != nil {
					d.log.Error("reload", "err", err)
				}
				continue
			}
			d.log.Info("shutting down", "signal", s.String())
			return d.Shutdown(context.Background())
		}
	}
}

// Start brings the gateway up: it refuses to start when the configuration is
// invalid, the audit log cannot be opened, or the Docker Engine is unreachable.
func Start(ctx context.Context, opts Options) (*Daemon, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	d := &Daemon{opts: opts, log: log, services: services{log: log}, meter: modeldoor.NewMeter(), upDone: make(chan struct{})}
	sandboxes, agentsClient := d.sandboxBackend()
	lastCopy, fleetFollower := d.fleetCopy()
	lastCatchUp, indexFollower := d.auditIndex()
	lastCosign, cosigner := d.witnesses()
	listeners, adminAPI := d.adminAPI()
	// Started in this order and stopped in reverse (Shutdown): each part
	// starts after what it uses and stops before it. A part with only a
	// stop stands where that stop must come, even when what it stops is
	// made further down.
	if err := d.services.start(ctx, []service{
		d.homeLock(), // first: a second daemon must touch nothing of the first's
		{name: "configuration", start: d.configure},
		{name: "trace export", stop: d.stopTracer}, // the spans of the last calls
		sandboxes,
		agentsClient,
		lastCopy,    // the last copy and catch-up follow the audit log's close:
		lastCatchUp, // they take everything it got
		lastCosign,  // and the witnesses the checkpoint it writes as it closes
		{name: "audit log", start: d.openAudit, stop: func(context.Context) error { return d.audit.Close() }},
		{name: "gateway", start: d.wire},
		{name: "sandboxes removed on exit", stop: d.removeOnExit}, // after the calls in flight, on the record
		indexFollower,
		fleetFollower,
		cosigner,
		d.hookServer(),                           // its state saved once the calls in flight have ended,
		{name: "calls in flight", stop: d.drain}, // their results recorded before the audit log closes
		{name: "agent sockets", stop: func(context.Context) error { return d.sock.Close() }}, // closed, not drained
		{name: "upstream MCP servers", stop: func(context.Context) error { d.upstreams.Close(); return nil }},
		d.mcpDoor(),
		listeners,
		d.bringUp(), // behind the listening admin API: with many agents that takes seconds
		adminAPI,    // drained before the bring-up ends: a call may wait for its sandbox
		// Calls waiting for a person are denied, on the record, so no
		// connection stays open for an answer that cannot come.
		{name: "approvals", stop: func(context.Context) error { d.approvals.Close(); return nil }},
		d.agentController(), // stops first: no reload starts under a shutdown
	}); err != nil {
		return nil, err
	}
	log.Info("toolgate serving", append(d.sandboxes.Describe(), "home", opts.Home, "agents", len(d.config().Agents), "audit", d.config().Gateway.Audit.Dir,
		"nofile", d.conns.Limit, "conns_admin", d.conns.Admin, "conns_tcp", d.conns.TCP, "conns_agents", d.conns.Agents)...)
	if opts.Ready != nil {
		opts.Ready()
	}
	return d, nil
}

// shutdownTimeout bounds a shutdown: the calls in flight and the admin
// API's requests get that long to finish.
const shutdownTimeout = 30 * time.Second

// Shutdown stops accepting requests, waits for calls in flight, then closes
// the audit log. Sandboxes keep running, and the next serve re-attaches to
// them, unless they are to be removed on exit.
func (d *Daemon) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
	defer cancel()
	return d.services.stop(ctx)
}

// ModelDoor is the model door, for in-process callers (toolgate's own
// agent loop): Send decides, budgets and records like a sandbox's request.
func (d *Daemon) ModelDoor() *modeldoor.Door { return d.models }

// Gateway is the running pipeline (tests and other entry points use it).
func (d *Daemon) Gateway() *gateway.Gateway { return d.gw }

// SandboxesUp is closed once each sandbox of the start is up or failed.
func (d *Daemon) SandboxesUp() <-chan struct{} { return d.upDone }

// FlushAudit writes the entries still queued (results are recorded behind
// their answers), so that what reads the audit files sees every call
// answered so far.
func (d *Daemon) FlushAudit() error { return d.audit.Flush() }

// setSpecs installs the sandboxes' specs and the agent sockets they
// reach the gateway through; a new agent's sandbox is starting from here.
func (d *Daemon) setSpecs(b *assemble.Built) ([]sandbox.AgentSpec, error) {
	specs := b.Specs(d.client)
	if err := d.sandboxes.SetSpecs(specs); err != nil {
		return nil, fmt.Errorf("sandbox specs: %w", err)
	}
	if err := d.sock.SetAgents(agentSockets(d.sandboxes.Sockets(specs))); err != nil {
		return nil, fmt.Errorf("agent sockets: %w", err)
	}
	return specs, nil
}

// ensureSandboxes makes every agent's sandbox exist, match its spec and
// run (a reload), building the default image first when an agent uses it
// and it is missing; sandbox.UpParallel agents at a time. A changed sandbox
// with calls in flight is recreated once they finish: pending names those
// agents; failed holds the agents whose sandbox did not come up, err what
// stopped them all.
func (d *Daemon) ensureSandboxes(ctx context.Context, b *assemble.Built) (pending []string, failed map[string]error, err error) {
	specs, err := d.setSpecs(b)
	if err != nil {
		return nil, nil, err
	}
	if err := prepare(ctx, d.sandboxes, specs); err != nil {
		return nil, nil, err
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, sandbox.UpParallel)
	)
	failed = map[string]error{}
	for _, s := range specs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			waits, err := d.sandboxes.Sync(ctx, s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[s.Agent] = fmt.Errorf("sandbox for agent %s: %w", s.Agent, err)
			}
			if waits {
				pending = append(pending, s.Agent)
			}
		}()
	}
	wg.Wait()
	slices.Sort(pending)
	return pending, failed, nil
}

// joinFailed is ensureSandboxes' failures as one error, in agent order.
func joinFailed(failed map[string]error) error {
	var errs []error
	for _, a := range slices.Sorted(maps.Keys(failed)) {
		errs = append(errs, failed[a])
	}
	return errors.Join(errs...)
}

// Reloaded is what a reload left for later.
type Reloaded struct {
	// RecreatePending are the agents whose sandbox changed while calls ran
	// in it: it is recreated once they finish (new calls wait for it), or
	// after the agent's exec timeout and a grace at the latest.
	RecreatePending []string
	// Failed are the agents whose sandbox did not come up, with why.
	Failed map[string]error
}

// Reload re-reads the configuration and swaps it in; calls in flight finish
// on the snapshot they started with. An invalid file changes nothing. Its
// answer is logged too: a sandbox whose spec changed while calls ran in it
// is named as recreated once they finish.
func (d *Daemon) Reload(ctx context.Context) (Reloaded, error) {
	d.reloads.Lock()
	defer d.reloads.Unlock()
	cfg, err := d.load()
	if err == nil {
		var built *assemble.Built
		if built, err = assemble.Build(cfg, d.upstreams, d.meter); err == nil {
			return d.swap(ctx, built)
		}
	}
	return Reloaded{}, fmt.Errorf("configuration not reloaded, the running one stays: %w", err)
}

// swap puts a built configuration in force and brings the sandboxes in line.
func (d *Daemon) swap(ctx context.Context, built *assemble.Built) (Reloaded, error) {
	cfg := built.Config
	d.bounder.AddSecrets(built.Secrets.Values()...) // before any call can use a new secret
	d.mu.Lock()
	old := d.built
	d.built = built
	d.mu.Unlock()
	d.gw.Swap(built.Snapshot)
	d.rates.Configure(cfg)
	d.sessions.SetDefaults(cfg)
	if err := d.setNotify(built); err != nil {
		d.log.Error("the approval notifiers stay as they were", "err", err)
	}
	if old.Config.Gateway.Listen != cfg.Gateway.Listen || !reflect.DeepEqual(old.Config.Gateway.Audit, cfg.Gateway.Audit) ||
		old.Config.Gateway.ClientBinary != cfg.Gateway.ClientBinary {
		d.log.Warn("gateway.listen, gateway.audit and gateway.clientBinary take effect only when toolgate serve restarts")
	}
	if !reflect.DeepEqual(old.Config.Gateway.Telemetry, cfg.Gateway.Telemetry) {
		d.log.Warn("gateway.telemetry takes effect only when toolgate serve restarts")
	}
	d.upstreams.Prune(cfg)
	pending, failed, err := d.ensureSandboxes(ctx, built)
	ans := Reloaded{RecreatePending: pending, Failed: failed}
	errs := []error{err, joinFailed(failed)}
	if len(pending) > 0 {
		d.log.Info("configuration reloaded", "agents", len(cfg.Agents), "sandbox_recreate_pending_until_idle", pending)
	} else {
		d.log.Info("configuration reloaded", "agents", len(cfg.Agents))
	}
	// An agent taken out of the config loses its sandbox (its workspace stays
	// on the host): nothing of it should keep running unaccounted for.
	for name := range old.Config.Agents {
		if _, kept := cfg.Agents[name]; !kept {
			if err := d.sandboxes.Remove(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("removing the sandbox of agent %s: %w", name, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ans, fmt.Errorf("configuration reloaded, but: %w", err)
	}
	return ans, nil
}

// current is the built configuration in force.
func (d *Daemon) current() *assemble.Built {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.built
}

// config is the configuration in force.
func (d *Daemon) config() *config.Config { return d.current().Config }

// hasKey reports whether a model provider's secret resolves for an agent.
func (d *Daemon) hasKey(agent, provider, secret string) bool {
	_, err := d.current().Secrets.Resolve(agent, provider, secret)
	return err == nil
}

func (d *Daemon) explain(call *gateway.Call) any { return d.current().Explain(call) }

func (d *Daemon) status(ctx context.Context) ([]api.AgentStatus, error) {
	agents := d.config().Agents
	st, err := d.sandboxes.Status(ctx)
	if err != nil {
		return nil, err
	}
	byAgent := map[string]sandbox.Status{}
	for _, s := range st {
		byAgent[s.Agent] = s
	}
	var rows []api.AgentStatus
	for name, a := range agents {
		s, ok := byAgent[name]
		row := api.AgentStatus{Agent: name, Image: a.Image, State: sandbox.StateMissing}
		if ok {
			row.Container, row.Image, row.State, row.StartedAt, row.Error = s.ContainerID, s.Image, s.State, s.StartedAt, s.Error
			row.Waiting = s.Waiting
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b api.AgentStatus) int { return strings.Compare(a.Agent, b.Agent) })
	return rows, nil
}

// listen opens the admin API's listeners: HOME/admin.sock (0600) and, when
// configured, a loopback TCP address.
func (d *Daemon) listen(cfg *config.Config) ([]net.Listener, error) {
	sock := filepath.Join(d.opts.Home, api.SocketName)
	if err := removeStaleSocket(sock); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	lns := []net.Listener{connlimit.Listen(proto.SendBufferListener{Listener: ln}, d.conns.Admin, nil)}
	if cfg.Gateway.Listen != "" {
		tcp, err := net.Listen("tcp", cfg.Gateway.Listen)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("gateway.listen: %w", err)
		}
		lns = append(lns, connlimit.Listen(tcp, d.conns.TCP, nil).LimitSources(connlimit.NewSources(d.conns.PerSource, d.refuseConn)))
	}
	return lns, nil
}

// serve serves h on each of lns, until the servers are shut down.
func (d *Daemon) serve(h http.Handler, lns []net.Listener) []*http.Server {
	var servers []*http.Server
	for _, l := range lns {
		srv := connlimit.Server(h, connlimit.Defaults, slog.NewLogLogger(d.log.Handler(), slog.LevelWarn))
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("admin API stopped", "addr", l.Addr().String(), "err", err)
			}
		}()
	}
	return servers
}

// refuseConn records a connection to gateway.listen refused because its
// source held its limit, every one of those connections in a request.
func (d *Daemon) refuseConn(source string, remote net.Addr, open int) {
	call := &gateway.Call{Kind: gateway.KindAdmin, Tool: "connect", Via: "tcp",
		Detail: map[string]any{"source": source, "remote": remote.String(), "open": open}}
	err := d.gw.Refuse(source, call, gateway.Decision{Rule: connlimit.RuleSourceLimit,
		Reason: fmt.Sprintf("%s holds %d connections to gateway.listen, each in a request: its limit", source, open)})
	if errors.Is(err, gateway.ErrAuditUnavailable) {
		d.log.Error("auditing a refused connection failed", "source", source, "err", err)
	}
}

// removeStaleSocket deletes a socket file nobody answers on, and refuses to
// start when another daemon does.
func removeStaleSocket(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("another toolgate daemon is serving on %s", path)
	}
	return os.Remove(path)
}

// claudeTools are Claude Code's own tool names: labels for its hook calls.
// Any other name a hook call carries is counted as "unknown", so a sandbox
// cannot grow the metrics by inventing names.
var claudeTools = map[string]bool{"Bash": true, "Read": true, "Write": true, "Edit": true, "MultiEdit": true,
	"NotebookEdit": true, "Glob": true, "Grep": true, "WebFetch": true, "WebSearch": true, "Task": true, "TodoWrite": true}

// configuredModels are the model names and patterns cfg lists: every
// provider's prices and every agent's allowlist, sorted and once each.
func configuredModels(cfg *config.Config) []string {
	var names []string
	for _, p := range cfg.Gateway.Models {
		names = slices.AppendSeq(names, maps.Keys(p.Prices))
	}
	for _, a := range cfg.Agents {
		if a.Model != nil {
			names = append(names, a.Model.Allow...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func (d *Daemon) newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Sources{
		Known: func(agent string, kind gateway.Kind, tool string) (bool, bool) {
			snap := d.gw.Snapshot()
			_, a := snap.Agents[agent]
			if kind == gateway.KindModel { // its tool is the provider
				_, t := d.config().Gateway.Models[tool]
				return a, t
			}
			_, t := snap.Tools[tool]
			for _, bk := range snap.ByKind {
				t = t || bk.Name() == tool
			}
			return a, t || claudeTools[tool]
		},
		Models: func() []string { return configuredModels(d.config()) },
		Sandboxes: func(ctx context.Context) (byState, waiting map[string]int) {
			rows, err := d.status(ctx)
			if err != nil {
				return map[string]int{"unknown": len(d.config().Agents)}, nil
			}
			byState, waiting = map[string]int{}, map[string]int{}
			for _, r := range rows {
				byState[r.State]++
				waiting[r.Agent] = r.Waiting
			}
			return byState, waiting
		},
		Audit: func() (uint64, uint64) {
			st := d.audit.Stats()
			return st.Entries, st.Syncs
		},
		IndexLag: func() time.Duration {
			if d.index == nil {
				return -time.Second
			}
			return d.index.Lag(d.audit.Position())
		},
		PostgresLag: func() time.Duration {
			if d.fleet == nil {
				return -time.Second
			}
			return d.fleet.Lag(d.audit.Position())
		},
	})
}
