package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

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
	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/host/kubeagents"
	"github.com/toolgate/toolgate/internal/host/ratelimit"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/host/sandbox/kube"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/host/session"
	"github.com/toolgate/toolgate/internal/host/tracing"
	"github.com/toolgate/toolgate/internal/host/upstream"
	"github.com/toolgate/toolgate/internal/host/witness"
	"github.com/toolgate/toolgate/internal/lib/lockedfile"
	"github.com/toolgate/toolgate/internal/proto/api"
	"k8s.io/client-go/rest"
)

// The daemon's parts, in the order Start starts them.

// configure reads the configuration and builds its first snapshot.
func (d *Daemon) configure(context.Context) (err error) {
	// An edit of a shared state file cut short by a crash leaves its
	// temporary file. Removing it takes the edit lock: a CLI edit in
	// progress is not disturbed.
	for _, f := range []string{auth.StoreFile, upstream.PinsFile} {
		if err := lockedfile.RemoveLeftover(filepath.Join(d.opts.Home, f)); err != nil {
			d.log.Warn("leftover temporary file not removed", "file", f+".tmp", "err", err)
		}
	}
	cfg, err := config.Load(d.opts.Home, d.opts.ConfigPath)
	if err != nil {
		return err
	}
	if d.upstreams, err = assemble.OpenUpstreams(cfg.Home); err != nil {
		return err
	}
	if d.built, err = assemble.Build(cfg, d.upstreams, d.meter); err != nil {
		return err
	}
	d.tokens, err = auth.OpenStore(filepath.Join(d.opts.Home, auth.StoreFile))
	return err
}

// sandboxBackend connects the backend gateway.sandbox.backend chooses;
// then, with the kubernetes backend watching Agents, agentsClient makes
// the Agent controller (its loop is agentController, last to start).
func (d *Daemon) sandboxBackend() (backend, agentsClient service) {
	var kubeREST *rest.Config
	backend = service{name: "sandbox backend", start: func(ctx context.Context) (err error) {
		kubeREST, err = d.openSandboxes(ctx)
		return err
	}, stop: func(context.Context) error { return d.sandboxes.Close() }}
	agentsClient = service{name: "Agent controller client", start: func(context.Context) (err error) {
		if k := d.config().Gateway.Sandbox.Kubernetes; d.kube != nil && k.WatchAgents() {
			d.agents, err = kubeagents.New(kubeagents.Options{Config: kubeREST, Namespace: k.Namespace, Node: k.Node,
				Gateway: agentsGateway{d}, Logger: d.log})
		}
		return err
	}}
	return backend, agentsClient
}

func (d *Daemon) openSandboxes(ctx context.Context) (kubeREST *rest.Config, err error) {
	d.sandboxes, d.kube, kubeREST, d.client, err = openBackend(ctx, d.config(), d.opts.Home, d.log)
	return kubeREST, err
}

// openBackend connects the backend cfg.Gateway.Sandbox.Backend chooses for
// the home: kube and kubeREST are it with the kubernetes backend, client
// the in-sandbox client binary the Docker backend mounts.
func openBackend(ctx context.Context, cfg *config.Config, home string, log *slog.Logger) (b sandbox.Backend, k *kube.Manager, kubeREST *rest.Config, client string, err error) {
	switch cfg.Gateway.Sandbox.Backend {
	case config.BackendKubernetes:
		// The in-sandbox client is in the sandbox image (kube.WriteImage).
		if k, kubeREST, err = newKube(ctx, cfg.Gateway.Sandbox.Kubernetes, log); err != nil {
			return nil, nil, nil, "", err
		}
		return k, k, kubeREST, "", nil
	default:
		if client, err = ClientBinary(cfg); err != nil {
			return nil, nil, nil, "", err
		}
		mgr, err := docker.New(ctx, docker.Options{Instance: docker.InstanceID(home), Home: home, Logger: log})
		if err != nil {
			return nil, nil, nil, "", err
		}
		return mgr, nil, nil, client, nil
	}
}

// fleetPoll is how often the fleet copy looks for new audit entries.
const fleetPoll = 500 * time.Millisecond

// fleetFinal bounds the last copy at shutdown: a database that is away
// gets the rest on the next start, from the files.
const fleetFinal = 5 * time.Second

// fleetCopy copies the audit log into the fleet database when
// gateway.audit.postgres is set. Only a DSN that cannot be used at all
// stops the start; an unreachable database is the follower's to wait out,
// and calls never wait for it.
func (d *Daemon) fleetCopy() (last, follower service) {
	return d.followed("fleet copy", func() (*logCopy, error) {
		b := d.current()
		id, err := identity.GatewayID(b.Config.Home) // this gateway's chain in the fleet database
		if err != nil {
			return nil, err
		}
		pg := b.Config.Gateway.Audit.Postgres
		if pg == nil {
			d.log.Info("gateway id", "gateway", id)
			return nil, nil
		}
		dsn, err := auditpg.ExpandDSN(pg.DSN, b.Secrets)
		if err != nil {
			return nil, err
		}
		s, err := auditpg.Open(context.Background(), dsn, d.log)
		if err != nil {
			return nil, fmt.Errorf("gateway.audit.postgres.dsn: %w", err)
		}
		d.log.Info("copying the audit log to the fleet database", "gateway", id, "dsn", auditpg.Redact(pg.DSN))
		d.fleet = s
		dir := b.Config.Gateway.Audit.Dir
		return &logCopy{
			follow: func(ctx context.Context) { s.Follow(ctx, dir, id, fleetPoll, nil) },
			last: func() error {
				// A database that is away gets the rest on the next start.
				ctx, cancel := context.WithTimeout(context.Background(), fleetFinal)
				defer cancel()
				_, err := s.CatchUp(ctx, dir, id)
				return err
			},
			close: func() error { s.Close(); d.fleet = nil; return nil },
		}, nil
	})
}

// indexPoll is how often the index looks for new audit entries: its lag.
const indexPoll = 250 * time.Millisecond

// auditIndex keeps the audit index caught up in the background: this
// daemon is its one writer (auditindex), and answers the CLI's queries
// from it (adminapi). Calls never wait for it.
func (d *Daemon) auditIndex() (last, follower service) {
	return d.followed("audit index", func() (*logCopy, error) {
		x := auditindex.New(d.config().Gateway.Audit.Dir, d.log, d.audit.Position)
		d.index = x
		return &logCopy{
			follow: func(ctx context.Context) { x.Follow(ctx, indexPoll, nil) },
			last: func() error {
				if _, err := x.CatchUp(); err != nil && !errors.Is(err, auditindex.ErrUnavailable) {
					return err
				}
				return nil
			},
			close: x.Close,
		}, nil
	})
}

// logCopy is a copy of the audit log this daemon keeps caught up: the
// index, the fleet database, the witnesses' cosignatures.
type logCopy struct {
	follow func(ctx context.Context) // until ctx ends
	last   func() error              // one catch-up once the log is closed
	close  func() error              // nil: nothing to close
}

// followed makes the two services of a copy of the log: follower opens it
// (nil: none is configured) and follows it; last, which stands after the
// audit log's close, catches it up with everything the log got and closes
// it.
func (d *Daemon) followed(what string, open func() (*logCopy, error)) (last, follower service) {
	var c *logCopy
	var follow task
	last = service{name: what + ", last", stop: func(context.Context) error {
		if c == nil {
			return nil
		}
		if err := c.last(); err != nil {
			d.log.Warn(what+": last catch-up failed; the rest follows on the next start", "err", err)
		}
		if c.close == nil {
			return nil
		}
		return c.close()
	}}
	follower = service{name: what, start: func(context.Context) (err error) {
		if c, err = open(); err != nil || c == nil {
			return err
		}
		follow.run(c.follow)
		return nil
	}, stop: follow.end}
	return last, follower
}

// openAudit opens the audit log, its checkpoints signed with the
// gateway's key (made here the first time: a home from before keys has
// none).
func (d *Daemon) openAudit(context.Context) (err error) {
	cfg := d.config()
	keys, created, err := identity.Ensure(cfg.Home)
	if err != nil {
		return fmt.Errorf("the gateway's signing key: %w", err)
	}
	if created {
		d.log.Info("made the gateway's signing key", "file", keys.Current.File, "key", keys.Current.Verifier)
	}
	d.keys = keys
	a := cfg.Gateway.Audit
	if d.audit, err = audit.Open(a.Dir, audit.Options{MaxFileBytes: a.MaxFileBytes, Logger: d.log, CloseInterrupted: true,
		Key: keys.Current.Signer, OldKeys: keys.OldSigners(), CheckpointEvery: a.CheckpointEvery, CheckpointInterval: a.CheckpointInterval}); err != nil {
		return fmt.Errorf("opening the audit log: %w", err)
	}
	return nil
}

// cosignPoll is how often the witnesses' cosigner looks for a new checkpoint.
const cosignPoll = time.Second

// witnesses sends each checkpoint the log writes to the witnesses of
// gateway.audit.witnesses, which cosign it only if it is consistent with
// the history they saw before; last cosigns the checkpoint the log writes
// as it closes.
func (d *Daemon) witnesses() (last, follower service) {
	return d.followed("witness cosigning", func() (*logCopy, error) {
		a := d.config().Gateway.Audit
		if len(a.Witnesses) == 0 {
			return nil, nil
		}
		var peers []witness.Peer
		for _, w := range a.Witnesses {
			peers = append(peers, witness.Peer{URL: w.URL, Key: w.Key})
		}
		c, err := witness.NewCosigner(a.Dir, peers, d.log)
		if err != nil {
			return nil, err
		}
		d.cosigner = c
		return &logCopy{
			follow: func(ctx context.Context) { c.Follow(ctx, cosignPoll) },
			last: func() error {
				cp, err := audit.LatestCheckpoint(a.Dir)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(context.Background(), fleetFinal)
				defer cancel()
				_, err = c.Cosign(ctx, cp)
				return err
			},
		}, nil
	})
}

// checkpoint signs a checkpoint of the audit log now, with the witnesses'
// cosignatures when there are witnesses (a receipt of a session just
// ended): one that did not answer is logged, the checkpoint still given.
func (d *Daemon) checkpoint() ([]byte, error) {
	cp, err := d.audit.Checkpoint()
	if err != nil || d.cosigner == nil {
		return cp, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetFinal)
	defer cancel()
	cosigned, err := d.cosigner.Cosign(ctx, cp)
	if err != nil {
		d.log.Warn("a checkpoint without every witness's cosignature", "err", err)
	}
	return cosigned, nil
}

// identityOf is the gateway's keys as the admin API gives them.
func (d *Daemon) identityOf() api.Identity {
	id := api.Identity{Origin: d.keys.Origin, Key: d.keys.Current.Verifier}
	for _, o := range d.keys.Old {
		id.OldKeys = append(id.OldKeys, o.Verifier)
	}
	return id
}

// wire makes the gateway on the audit log and the sandboxes, and the
// agent sockets' doors on it.
func (d *Daemon) wire(ctx context.Context) (err error) {
	b := d.current()
	cfg, log := b.Config, d.log
	d.bounder = audit.NewBounder(cfg.Gateway.Audit.MaxArgBytes)
	d.bounder.AddSecrets(b.Secrets.Values()...)
	d.approvals = approval.New(d.bounder) // a waiting call shows what its entries record
	if err := d.setNotify(b); err != nil {
		return err
	}
	d.rates = ratelimit.New()
	d.rates.Configure(cfg)
	d.sessions = session.New()
	d.sessions.SetDefaults(cfg)
	start := time.Now()
	if err := d.sessions.Rebuild(cfg.Gateway.Audit.Dir); err != nil {
		return fmt.Errorf("rebuilding the session labels from the audit log: %w", err)
	}
	log.Debug("session labels rebuilt from the audit log", "took", time.Since(start))
	d.metrics = d.newMetrics()
	observer := gateway.Observers{d.metrics}
	if o := cfg.Gateway.Telemetry.OTLP; o != nil {
		if d.tracer, err = newTracer(ctx, cfg.Home, o, log); err != nil {
			return err
		}
		observer = append(observer, d.tracer)
	}
	if d.agents != nil {
		observer = append(observer, d.agents.Observer())
	}
	d.gw = gateway.New(gateway.Options{Audit: d.audit, Sandboxes: d.sandboxes, BoundArgs: d.bounder.Bound, Logger: log, AsyncResults: true,
		Approvals: d.approvals, Limiter: d.rates, Sessions: d.sessions, Observer: observer}, b.Snapshot)

	nofile, err := connlimit.Nofile()
	if err != nil {
		return fmt.Errorf("reading the descriptor limit: %w", err)
	}
	d.conns = connlimit.Plan(nofile)
	d.sock = agentsock.New(d.gw, agentsock.Options{Logger: log, MaxConns: d.conns.PerAgent, Pool: connlimit.NewPool(d.conns.Agents)})
	serveSockets(d.sandboxes, d.sock)
	d.sock.Handle(egress.Pattern, egress.NewHandler(d.gw))
	d.models = modeldoor.New(d.gw)
	d.sock.Handle("POST "+modeldoor.Pattern, d.models)
	return nil
}

// setNotify gives the approvals the notifiers of a configuration, their
// URLs' secrets expanded (granted to agent "*" and tool approvals.notify).
func (d *Daemon) setNotify(b *assemble.Built) error {
	a := b.Config.Gateway.Approvals
	n := &approval.Notify{LinkBase: a.LinkBase, RequireToken: a.RequireToken, Logger: d.log}
	for i, c := range a.Notify {
		u, err := secrets.Expand(c.URL, func(name string) (string, error) { return b.Secrets.Resolve("*", NotifySecretTool, name) })
		if err != nil {
			return fmt.Errorf("gateway.approvals.notify[%d].url: %w", i, err)
		}
		n.Notifiers = append(n.Notifiers, &approval.Notifier{Name: c.Name, Kind: c.Kind, URL: u, Timeout: c.Timeout, Attempts: c.Attempts})
	}
	d.approvals.SetNotify(n)
	return nil
}

// NotifySecretTool is the tool a host secret names to be usable in a
// notifier's URL.
const NotifySecretTool = "approvals.notify"

// newTracer starts the trace exporter, this gateway named by its fleet id.
func newTracer(ctx context.Context, home string, o *config.OTLP, log *slog.Logger) (*tracing.Tracer, error) {
	id, err := identity.GatewayID(home)
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

// hookServer serves Claude Code's hooks on the agent sockets; its stop
// saves its dedup state a last time.
func (d *Daemon) hookServer() service {
	return service{name: "hook server", start: func(context.Context) (err error) {
		d.hooks, err = hookserver.New(hookserver.Options{Gateway: d.gw, AuditDir: d.config().Gateway.Audit.Dir,
			StatePath: filepath.Join(d.opts.Home, hookserver.StateFile), Position: d.audit.Position, Logger: d.log})
		if err == nil {
			d.hooks.Mount(d.sock)
		}
		return err
	}, stop: func(context.Context) error { return d.hooks.Close() }}
}

// drain waits for the calls in flight, from the agent sockets (closed,
// not drained) and the other entry points: their result entries must
// reach the audit log before it closes.
func (d *Daemon) drain(ctx context.Context) error {
	if err := d.gw.Wait(ctx); err != nil {
		return fmt.Errorf("calls still running at shutdown; their results are not recorded: %w", err)
	}
	return nil
}

// mcpDoor is the MCP door, on the agent sockets here and on the admin
// API's listeners (adminAPI).
func (d *Daemon) mcpDoor() service {
	return service{name: "MCP door", start: func(context.Context) error {
		d.door = mcp.New(d.gw, mcp.Options{Home: d.opts.Home, Logger: d.log, Visible: mcp.VisibleFromConfig(d.config),
			Generation: d.upstreams.Pins().Generation})
		d.sock.Handle("/mcp", d.door.Handler(mcp.AgentIdentity(func(r *http.Request) (string, bool) {
			agent := agentsock.Agent(r.Context())
			return agent, agent != ""
		})))
		return nil
	}, stop: func(context.Context) error { return d.door.Close() }}
}

// bringUp installs the sandboxes' specs and serves their agent sockets (a
// new agent's sandbox is starting from here), then brings the sandboxes up
// in the background. Its stop ends a bring-up still under way: sandboxes
// already started keep running, and the next serve re-attaches to them.
func (d *Daemon) bringUp() service {
	var up task
	return service{name: "sandbox bring-up", start: func(context.Context) error {
		specs, err := d.setSpecs(d.current())
		if err != nil {
			return err
		}
		up.run(func(ctx context.Context) {
			defer close(d.upDone)
			start := time.Now()
			<-d.sandboxes.Up(ctx, specs)
			if ctx.Err() == nil {
				d.log.Info("sandboxes brought up", "agents", len(specs), "took", time.Since(start).Round(time.Millisecond).String())
			}
		})
		return nil
	}, stop: up.end}
}

// adminAPI is the admin API, the dashboard (/ui), /mcp and /metrics on the
// admin socket and gateway.listen. listeners opens them: before the
// sandboxes come up, which take seconds with many agents, while the admin
// API answers (they show starting); the admin API serves after. Its stop
// drains the requests in flight, before the bring-up ends: a call may be
// waiting for its sandbox.
func (d *Daemon) adminAPI() (listeners, api service) {
	var lns []net.Listener
	listeners = service{name: "admin listeners", start: func(context.Context) (err error) {
		lns, err = d.listen(d.config())
		return err
	}, stop: func(context.Context) error {
		for _, l := range lns {
			l.Close() // the admin API's stop closed them already, unless a start failed in between
		}
		return nil
	}}
	var (
		dash    *dashboard.Dashboard
		servers []*http.Server
	)
	api = service{name: "admin API", start: func(context.Context) error {
		srv := &adminapi.Server{Gateway: d.gw, Tokens: d.tokens, Status: d.status, Explain: d.explain, Approvals: d.approvals, Audit: d.index,
			Checkpoint: d.checkpoint, Identity: d.identityOf, Tasks: d.sessions, Labels: d.sessions, Sandboxes: d.sandboxOps,
			Observations: connlimit.Unbounded(d.hooks.Ingest()), // a transcript may be piped in as it is written
			Sessions: connlimit.Unbounded(&agentloop.Server{Model: d.models, Gateway: d.gw, Skills: d.door, // a session runs for minutes
				Store: agentloop.NewStore(agentloop.SessionsDir(d.opts.Home)), Config: d.config, HasKey: d.hasKey, Tasks: d.sessions})}
		host := http.NewServeMux()
		host.Handle("GET /metrics", connlimit.Bounded(d.metrics.Handler(), connlimit.Defaults.Header)) // no token: nobody may hold it open
		host.Handle("/mcp", auth.Require(d.tokens, auth.ScopeMCP, mcp.RouteOptions(srv.RefusalsVia(mcp.Via)))(d.door.Handler(mcp.TokenIdentity)))
		dash = dashboard.New(dashboard.Options{Tokens: d.tokens, Index: d.index, Agents: d.status, Config: d.config,
			Approvals: d.approvals, OnRefuse: srv.RefusalsVia("dashboard"), Logger: d.log})
		host.Handle(dashboard.Prefix, dash.Handler())
		host.Handle("/", srv.Handler())
		servers = d.serve(host, lns)
		return nil
	}, stop: func(ctx context.Context) error {
		dash.Close() // its live feeds would hold the servers open
		var errs []error
		for _, s := range servers {
			errs = append(errs, s.Shutdown(ctx))
		}
		return errors.Join(errs...)
	}}
	return listeners, api
}
