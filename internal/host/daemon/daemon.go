// Package daemon is `toolgate serve`: it wires configuration, policy, audit,
// sandboxes and the gateway together, serves the admin API, and reloads on
// SIGHUP without dropping calls in flight.
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

	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/agentloop"
	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auditpg"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/connlimit"
	"github.com/toolgate/toolgate/internal/host/door/adminapi"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/dashboard"
	"github.com/toolgate/toolgate/internal/host/door/egress"
	"github.com/toolgate/toolgate/internal/host/door/hookserver"
	"github.com/toolgate/toolgate/internal/host/door/mcp"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/kubeagents"
	"github.com/toolgate/toolgate/internal/host/metrics"
	"github.com/toolgate/toolgate/internal/host/ratelimit"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/host/tracing"
	"github.com/toolgate/toolgate/internal/host/upstream"
	"github.com/toolgate/toolgate/internal/lib/lockedfile"
	"github.com/toolgate/toolgate/internal/lib/pidlock"
	"github.com/toolgate/toolgate/internal/proto"
	"k8s.io/client-go/rest"
)

// Options locate the daemon's configuration.
type Options struct {
	Home       string
	ConfigPath string // default HOME/config.yaml
	Logger     *slog.Logger
	// Ready, when set, is called once the admin API is listening.
	Ready func()
}

// Daemon is a running gateway.
type Daemon struct {
	opts  Options
	log   *slog.Logger
	audit *audit.Writer
	// sandboxes is the backend gateway.sandbox.backend chose; kube is it
	// when that is kubernetes.
	sandboxes backend
	kube      *kubeBackend
	gw        *gateway.Gateway
	client    string
	bounder   *audit.Bounder
	door      *mcp.Door
	models    *modeldoor.Door
	meter     *modeldoor.Meter // model spending; outlives reloads
	sock      *agentsock.Server
	mu        sync.Mutex // guards built across reloads
	built     *assemble.Built
	servers   []*http.Server
	lock      *pidlock.Lock // HOME/serve.lock, held while serving
	conns     connlimit.Budget
	hooks     *hookserver.Server

	// upstreams are the upstream MCP servers' connections: they outlive a
	// reload and end with the daemon.
	upstreams *upstream.Pool
	// approvals are the calls waiting for a person.
	approvals *approval.Store
	// index follows the audit log for queries (calls never wait for it).
	index     *auditindex.Index
	indexStop context.CancelFunc
	indexDone chan struct{}
	// dash is the web dashboard at /ui on the same listeners.
	dash *dashboard.Dashboard
	// fleet copies the audit log into the fleet's Postgres
	// (gateway.audit.postgres); nil when not configured.
	fleet     *auditpg.Store
	fleetStop context.CancelFunc
	fleetDone chan struct{}
	// gatewayID names this gateway's chain in the fleet database.
	gatewayID string
	// metrics are served at /metrics on the admin socket and TCP listener.
	metrics *metrics.Metrics
	// tracer exports a trace of each call (gateway.telemetry.otlp); nil: off.
	tracer *tracing.Tracer
	// rates count calls against the agents' rate limits; they outlive a
	// reload, so a config change does not reset a budget.
	rates *ratelimit.Limiter
	// up brings the sandboxes up behind the admin API, which answers from
	// the start (agents show starting); upDone is closed once each is up
	// or failed.
	upStop context.CancelFunc
	upDone <-chan struct{}

	// reloads serialises reloads: SIGHUP's and the Agent controller's.
	reloads sync.Mutex
	// extras are the Agent resources this gateway serves beside the
	// file's agents (guarded by mu); agents is their controller, nil
	// without the kubernetes backend or with its agents: false.
	extras     []config.Extra
	agents     *kubeagents.Controller
	agentsStop context.CancelFunc
	agentsDone chan struct{}
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
func Start(ctx context.Context, opts Options) (_ *Daemon, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	lock, err := lockHome(opts.Home)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Release()
		}
	}()
	// An edit of a shared state file cut short by a crash leaves its
	// temporary file. Removing it takes the edit lock: a CLI edit in
	// progress is not disturbed.
	for _, f := range []string{auth.StoreFile, upstream.PinsFile} {
		if err := lockedfile.RemoveLeftover(filepath.Join(opts.Home, f)); err != nil {
			log.Warn("leftover temporary file not removed", "file", f+".tmp", "err", err)
		}
	}
	cfg, err := config.Load(opts.Home, opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	ups, err := assemble.OpenUpstreams(cfg.Home)
	if err != nil {
		return nil, err
	}
	meter := modeldoor.NewMeter()
	built, err := assemble.Build(cfg, ups, meter)
	if err != nil {
		return nil, err
	}
	tokens, err := auth.OpenStore(filepath.Join(opts.Home, auth.StoreFile))
	if err != nil {
		return nil, err
	}
	d := &Daemon{opts: opts, log: log, built: built, lock: lock, upstreams: ups, meter: meter}
	var kubeREST *rest.Config
	switch cfg.Gateway.Sandbox.Backend {
	case config.BackendKubernetes:
		// The in-sandbox client is in the sandbox image (kube.WriteImage).
		if d.kube, kubeREST, err = newKube(ctx, cfg.Gateway.Sandbox.Kubernetes, log); err != nil {
			return nil, err
		}
		d.sandboxes = d.kube
	default:
		if d.client, err = ClientBinary(cfg); err != nil {
			return nil, err
		}
		mgr, err := docker.New(ctx, docker.Options{Instance: docker.InstanceID(opts.Home), Logger: log})
		if err != nil {
			return nil, err
		}
		d.sandboxes = dockerBackend{mgr}
	}
	if d.audit, err = audit.Open(cfg.Gateway.Audit.Dir, audit.Options{MaxFileBytes: cfg.Gateway.Audit.MaxFileBytes, Logger: log, CloseInterrupted: true}); err != nil {
		d.sandboxes.Close()
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	aw := d.audit
	d.bounder = audit.NewBounder(cfg.Gateway.Audit.MaxArgBytes)
	d.bounder.AddSecrets(built.Secrets.Values()...)
	d.approvals = approval.New(d.bounder) // a waiting call shows what its entries record
	d.rates = ratelimit.New()
	d.rates.Configure(cfg)
	d.metrics = d.newMetrics()
	observer := gateway.Observers{d.metrics}
	if o := cfg.Gateway.Telemetry.OTLP; o != nil {
		if d.tracer, err = newTracer(ctx, cfg.Home, o, log); err != nil {
			d.close()
			return nil, err
		}
		observer = append(observer, d.tracer)
	}
	if k := cfg.Gateway.Sandbox.Kubernetes; d.kube != nil && k.WatchAgents() {
		if d.agents, err = kubeagents.New(kubeagents.Options{Config: kubeREST, Namespace: k.Namespace, Node: k.Node,
			Gateway: agentsGateway{d}, Logger: log}); err != nil {
			d.close()
			return nil, err
		}
		observer = append(observer, d.agents.Observer())
	}
	d.gw = gateway.New(gateway.Options{Audit: aw, Sandboxes: d.sandboxes, BoundArgs: d.bounder.Bound, Logger: log, AsyncResults: true,
		Approvals: d.approvals, Limiter: d.rates, Observer: observer}, built.Snapshot)
	d.followIndex(cfg.Gateway.Audit.Dir)
	if err := d.followFleet(cfg, built.Secrets); err != nil {
		d.close()
		return nil, err
	}

	nofile, err := connlimit.Nofile()
	if err != nil {
		d.close()
		return nil, fmt.Errorf("reading the descriptor limit: %w", err)
	}
	d.conns = connlimit.Plan(nofile)
	d.sock = agentsock.New(d.gw, agentsock.Options{Logger: log, MaxConns: d.conns.PerAgent, Pool: connlimit.NewPool(d.conns.Agents)})
	if d.kube != nil {
		d.kube.serveWith(d.sock.SetAgents)
	}
	d.sock.Handle(egress.Pattern, egress.NewHandler(d.gw))
	d.models = modeldoor.New(d.gw)
	d.sock.Handle("POST "+modeldoor.Pattern, d.models)
	hs, err := hookserver.New(hookserver.Options{Gateway: d.gw, AuditDir: cfg.Gateway.Audit.Dir,
		StatePath: filepath.Join(opts.Home, hookserver.StateFile), Position: aw.Position, Logger: log})
	if err != nil {
		d.close()
		return nil, err
	}
	d.hooks = hs
	hs.Mount(d.sock)
	d.door = mcp.New(d.gw, mcp.Options{Home: opts.Home, Logger: log, Visible: mcp.VisibleFromConfig(d.config),
		Generation: ups.Pins().Generation})
	d.sock.Handle("/mcp", d.door.Handler(mcp.AgentIdentity(func(r *http.Request) (string, bool) {
		agent := agentsock.Agent(r.Context())
		return agent, agent != ""
	})))
	specs, err := d.setSpecs(built)
	if err != nil {
		d.close()
		return nil, err
	}
	api := &adminapi.Server{Gateway: d.gw, Tokens: tokens, Status: d.status, Explain: d.explain, Approvals: d.approvals, Audit: d.index,
		Observations: connlimit.Unbounded(hs.Ingest()), // a transcript may be piped in as it is written
		Sessions: connlimit.Unbounded(&agentloop.Server{Model: d.models, Gateway: d.gw, Skills: d.door, // a session runs for minutes
			Store: agentloop.NewStore(agentloop.SessionsDir(opts.Home)), Config: d.config, HasKey: d.hasKey})}
	host := http.NewServeMux()
	host.Handle("GET /metrics", connlimit.Bounded(d.metrics.Handler(), connlimit.Defaults.Header)) // no token: nobody may hold it open
	host.Handle("/mcp", auth.Require(tokens, auth.ScopeMCP, mcp.RouteOptions(api.RefusalsVia(mcp.Via)))(d.door.Handler(mcp.TokenIdentity)))
	d.dash = dashboard.New(dashboard.Options{Tokens: tokens, Index: d.index, Agents: d.status, Config: d.config,
		Approvals: d.approvals, OnRefuse: api.RefusalsVia("dashboard"), Logger: log})
	host.Handle(dashboard.Prefix, d.dash.Handler())
	host.Handle("/", api.Handler())
	if err := d.listen(host, cfg); err != nil {
		d.close()
		return nil, err
	}
	// The sandboxes come up behind the listening admin API: with many
	// agents that takes seconds, and status must answer meanwhile.
	d.startSandboxes(specs)
	if err := d.startAgents(ctx); err != nil {
		d.close()
		return nil, err
	}
	log.Info("toolgate serving", append(d.sandboxes.describe(), "home", opts.Home, "agents", len(cfg.Agents), "audit", cfg.Gateway.Audit.Dir,
		"nofile", nofile, "conns_admin", d.conns.Admin, "conns_tcp", d.conns.TCP, "conns_agents", d.conns.Agents)...)
	if opts.Ready != nil {
		opts.Ready()
	}
	return d, nil
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
	if err := d.sock.SetAgents(d.sandboxes.sockets(specs)); err != nil {
		return nil, fmt.Errorf("agent sockets: %w", err)
	}
	return specs, nil
}

// startSandboxes brings the sandboxes up in the background; Shutdown ends
// what is left of it.
func (d *Daemon) startSandboxes(specs []sandbox.AgentSpec) {
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	done := d.sandboxes.Up(ctx, specs)
	d.upStop, d.upDone = cancel, done
	go func() {
		<-done
		if ctx.Err() == nil {
			d.log.Info("sandboxes brought up", "agents", len(specs), "took", time.Since(start).Round(time.Millisecond).String())
		}
	}()
}

// stopSandboxStart ends a bring-up still under way (sandboxes already
// started keep running; the next serve re-attaches to them).
func (d *Daemon) stopSandboxStart() {
	if d.upStop == nil {
		return
	}
	d.upStop()
	<-d.upDone
}

// ensureSandboxes makes every agent's sandbox exist, match its spec and
// run (a reload), building the default image first when an agent uses it
// and it is missing; docker.UpParallel agents at a time. A changed sandbox
// with calls in flight is recreated once they finish: pending names those
// agents; failed holds the agents whose sandbox did not come up, err what
// stopped them all.
func (d *Daemon) ensureSandboxes(ctx context.Context, b *assemble.Built) (pending []string, failed map[string]error, err error) {
	specs, err := d.setSpecs(b)
	if err != nil {
		return nil, nil, err
	}
	if err := d.sandboxes.prepare(ctx, specs); err != nil {
		return nil, nil, err
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, docker.UpParallel)
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
	if old.Config.Gateway.Listen != cfg.Gateway.Listen || old.Config.Gateway.Audit != cfg.Gateway.Audit ||
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

// config is the configuration in force.
func (d *Daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.built.Config
}

// hasKey reports whether a model provider's secret resolves for an agent.
func (d *Daemon) hasKey(agent, provider, secret string) bool {
	d.mu.Lock()
	b := d.built
	d.mu.Unlock()
	_, err := b.Secrets.Resolve(agent, provider, secret)
	return err == nil
}

func (d *Daemon) explain(call *gateway.Call) any {
	d.mu.Lock()
	b := d.built
	d.mu.Unlock()
	return b.Explain(call)
}

func (d *Daemon) status(ctx context.Context) ([]adminclient.AgentStatus, error) {
	d.mu.Lock()
	agents := d.built.Config.Agents
	d.mu.Unlock()
	st, err := d.sandboxes.Status(ctx)
	if err != nil {
		return nil, err
	}
	byAgent := map[string]sandbox.Status{}
	for _, s := range st {
		byAgent[s.Agent] = s
	}
	var rows []adminclient.AgentStatus
	for name, a := range agents {
		s, ok := byAgent[name]
		row := adminclient.AgentStatus{Agent: name, Image: a.Image, State: sandbox.StateMissing}
		if ok {
			row.Container, row.Image, row.State, row.StartedAt, row.Error = s.ContainerID, s.Image, s.State, s.StartedAt, s.Error
			row.Waiting = s.Waiting
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b adminclient.AgentStatus) int { return strings.Compare(a.Agent, b.Agent) })
	return rows, nil
}

// listen serves the admin API on HOME/admin.sock (0600) and, when
// configured, on a loopback TCP address.
func (d *Daemon) listen(h http.Handler, cfg *config.Config) error {
	sock := filepath.Join(d.opts.Home, adminclient.SocketName)
	if err := removeStaleSocket(sock); err != nil {
		return err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return err
	}
	lns := []net.Listener{connlimit.Listen(proto.SendBufferListener{Listener: ln}, d.conns.Admin, nil)}
	if cfg.Gateway.Listen != "" {
		tcp, err := net.Listen("tcp", cfg.Gateway.Listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("gateway.listen: %w", err)
		}
		lns = append(lns, connlimit.Listen(tcp, d.conns.TCP, nil).LimitSources(connlimit.NewSources(d.conns.PerSource, d.refuseConn)))
	}
	for _, l := range lns {
		srv := connlimit.Server(h, connlimit.Defaults, slog.NewLogLogger(d.log.Handler(), slog.LevelWarn))
		d.servers = append(d.servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("admin API stopped", "addr", l.Addr().String(), "err", err)
			}
		}()
	}
	return nil
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

// Shutdown stops accepting requests, waits for calls in flight, then closes
// the audit log. Sandboxes keep running: the next serve re-attaches to them.
func (d *Daemon) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	// The Agent controller stops first: no reload starts under a shutdown.
	d.stopAgents()
	// Calls waiting for a person are denied first, on the record, so no
	// connection stays open for an answer that cannot come.
	d.approvals.Close()
	if d.dash != nil {
		d.dash.Close() // its live feeds would hold the servers open
	}
	for _, s := range d.servers {
		errs = append(errs, s.Shutdown(ctx))
	}
	d.stopSandboxStart()
	errs = append(errs, d.closeEntryPoints())
	// Calls from the agent sockets (closed, not drained) and from other
	// entry points may still be running: their result entries must reach
	// the audit log before it closes.
	if err := d.gw.Wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("calls still running at shutdown; their results are not recorded: %w", err))
	}
	errs = append(errs, d.closeHooks(), d.audit.Close(), d.stopIndex(), d.stopFleet(), d.sandboxes.Close(), d.stopTracer(ctx), d.lock.Release())
	return errors.Join(errs...)
}

func (d *Daemon) close() error {
	d.stopSandboxStart()
	return errors.Join(d.closeEntryPoints(), d.closeHooks(), d.audit.Close(), d.stopIndex(), d.stopFleet(), d.sandboxes.Close(),
		d.stopTracer(context.Background()))
}

// closeHooks saves the hook server's dedup state a last time.
func (d *Daemon) closeHooks() error {
	if d.hooks == nil {
		return nil
	}
	return d.hooks.Close()
}

func (d *Daemon) closeEntryPoints() error {
	d.stopAgents()
	var errs []error
	if d.door != nil {
		errs = append(errs, d.door.Close())
	}
	d.upstreams.Close()
	if d.sock != nil {
		errs = append(errs, d.sock.Close())
	}
	return errors.Join(errs...)
}

// indexPoll is how often the index looks for new audit entries: its lag.
const indexPoll = 250 * time.Millisecond

// followIndex keeps the audit index caught up in the background: this
// daemon is its one writer (auditindex), and answers the CLI's queries
// from it (adminapi). Calls never wait for it.
func (d *Daemon) followIndex(dir string) {
	x := auditindex.New(dir, d.log, d.audit.Position)
	ctx, cancel := context.WithCancel(context.Background())
	d.index, d.indexStop, d.indexDone = x, cancel, make(chan struct{})
	go func() {
		defer close(d.indexDone)
		x.Follow(ctx, indexPoll, nil)
	}()
}

func (d *Daemon) stopIndex() error {
	if d.index == nil {
		return nil
	}
	d.indexStop()
	<-d.indexDone
	// One last catch-up: what the log got before it closed is indexed.
	if _, err := d.index.CatchUp(); err != nil && !errors.Is(err, auditindex.ErrUnavailable) {
		d.log.Warn("audit index: final catch-up", "err", err)
	}
	return d.index.Close()
}

// newTracer starts the trace exporter, this gateway named by its fleet id.
func newTracer(ctx context.Context, home string, o *config.OTLP, log *slog.Logger) (*tracing.Tracer, error) {
	id, err := auditpg.GatewayID(home)
	if err != nil {
		return nil, err
	}
	log.Info("exporting traces", "endpoint", o.Endpoint, "protocol", o.Protocol) // config refuses credentials in it
	return tracing.New(ctx, o, id, log)
}

// stopTracer sends the spans still queued: a collector that does not take
// them within the shutdown's time loses them, nothing else waits.
func (d *Daemon) stopTracer(ctx context.Context) error {
	if d.tracer == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.tracer.Shutdown(ctx); err != nil {
		d.log.Warn("traces not all exported at shutdown", "err", err)
	}
	return nil
}

// fleetPoll is how often the fleet copy looks for new audit entries.
const fleetPoll = 500 * time.Millisecond

// followFleet starts copying the audit log into the fleet database when
// gateway.audit.postgres is set. Only a DSN that cannot be used at all stops
// the start; an unreachable database is the follower's to wait out, and
// calls never wait for it.
func (d *Daemon) followFleet(cfg *config.Config, store *secrets.Store) error {
	id, err := auditpg.GatewayID(cfg.Home)
	if err != nil {
		return err
	}
	d.gatewayID = id
	pg := cfg.Gateway.Audit.Postgres
	if pg == nil {
		d.log.Info("gateway id", "gateway", id)
		return nil
	}
	dsn, err := auditpg.ExpandDSN(pg.DSN, store)
	if err != nil {
		return err
	}
	s, err := auditpg.Open(context.Background(), dsn, d.log)
	if err != nil {
		return fmt.Errorf("gateway.audit.postgres.dsn: %w", err)
	}
	d.log.Info("copying the audit log to the fleet database", "gateway", id, "dsn", auditpg.Redact(pg.DSN))
	ctx, cancel := context.WithCancel(context.Background())
	d.fleet, d.fleetStop, d.fleetDone = s, cancel, make(chan struct{})
	go func() {
		defer close(d.fleetDone)
		s.Follow(ctx, cfg.Gateway.Audit.Dir, id, fleetPoll, nil)
	}()
	return nil
}

// fleetFinal bounds the last copy at shutdown: a database that is away
// gets the rest on the next start, from the files.
const fleetFinal = 5 * time.Second

func (d *Daemon) stopFleet() error {
	if d.fleet == nil {
		return nil
	}
	d.fleetStop()
	<-d.fleetDone
	ctx, cancel := context.WithTimeout(context.Background(), fleetFinal)
	defer cancel()
	if _, err := d.fleet.CatchUp(ctx, d.config().Gateway.Audit.Dir, d.gatewayID); err != nil {
		d.log.Warn("audit postgres: final copy; the rest follows on the next start", "err", err)
	}
	d.fleet.Close()
	d.fleet = nil
	return nil
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
