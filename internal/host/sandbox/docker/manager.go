// Package docker is the Docker Engine sandbox backend: one container per
// agent, created, re-attached or recreated from its spec, with exec and
// file I/O through the Engine API. Everything Docker-specific stays here,
// behind sandbox.Backend.
package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/hostexec"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

// Labels on every managed container.
const (
	LabelManaged = "toolgate.managed"
	LabelAgent   = "toolgate.agent"
	LabelSpec    = "toolgate.spec"
	// LabelInstance names the gateway home that owns the container: two
	// homes on one host may both have an agent called demo.
	LabelInstance = "toolgate.instance"
	// LabelHome is that home's path, so that prune can tell a home that is
	// gone (its sandboxes left behind) from one that is not.
	LabelHome  = "toolgate.home"
	NamePrefix = "toolgate-"
)

// specVersion is part of every spec hash: bump it when the container layout
// built here changes, so existing sandboxes are recreated.
const specVersion = "2"

// DefaultInstance is the instance of a Manager whose Options name none.
const DefaultInstance = "default"

// Options configure the connection to the Engine.
type Options struct {
	// Host overrides DOCKER_HOST, e.g. unix:///var/run/docker.sock.
	Host string
	// Instance tells this gateway's containers from other gateways' on the
	// same Engine (InstanceID of the home); it is part of every container
	// name and label. Empty: DefaultInstance.
	Instance string
	// Home is the path of the home the instance is, labelled on every
	// container (LabelHome).
	Home string
	// Logger gets debug notes (executor fallbacks); nil: slog.Default().
	Logger *slog.Logger
}

// InstanceID is the instance of a gateway home: the first 8 hex digits of
// the SHA-256 of its absolute path, stable across restarts.
func InstanceID(home string) string {
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	sum := sha256.Sum256([]byte(filepath.Clean(home)))
	return hex.EncodeToString(sum[:4])
}

// validInstance keeps instance ids within Docker's container name rules.
var validInstance = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,31}$`) })

// Manager owns the agents' sandbox containers.
type Manager struct {
	cli      *client.Client
	instance string
	home     string
	log      *slog.Logger

	agents *sandbox.Registry[Sandbox]
	sums   fileSums // of the binaries every sandbox mounts

	mu sync.Mutex
	// started is when each running container started, as its inspect
	// said once: Status lists every container in one request and asks
	// only about the ones it has not seen yet.
	started map[string]time.Time
}

var (
	_ sandbox.Backend  = (*Manager)(nil)
	_ sandbox.Preparer = (*Manager)(nil)
)

// New connects to the Engine (DOCKER_HOST and friends, or opts.Host) and
// negotiates the API version down to the engine's.
func New(ctx context.Context, opts Options) (*Manager, error) {
	if opts.Instance == "" {
		opts.Instance = DefaultInstance
	}
	if !validInstance().MatchString(opts.Instance) {
		return nil, fmt.Errorf("docker: invalid instance id %q", opts.Instance)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Home != "" {
		abs, err := filepath.Abs(opts.Home)
		if err != nil {
			return nil, err
		}
		opts.Home = abs
	}
	copts := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		copts = append(copts, client.WithHost(opts.Host))
	}
	cli, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		host := cli.DaemonHost()
		cli.Close()
		return nil, fmt.Errorf("cannot reach the Docker Engine at %s: %v — is dockerd running?", host, err)
	}
	m := &Manager{
		cli:      cli,
		instance: opts.Instance,
		home:     opts.Home,
		log:      opts.Logger,
		started:  map[string]time.Time{},
	}
	m.agents = sandbox.NewRegistry(func(agent string) *Sandbox { return &Sandbox{m: m, agent: agent} })
	return m, nil
}

// Close releases the Engine connection; containers keep running.
func (m *Manager) Close() error { return m.cli.Close() }

// Instance is the id that names and labels this manager's containers.
func (m *Manager) Instance() string { return m.instance }

// ContainerName is the agent's container name in this instance.
func (m *Manager) ContainerName(agent string) string {
	return NamePrefix + m.instance + "-" + agent
}

// APIVersion is the negotiated Engine API version.
func (m *Manager) APIVersion() string { return m.cli.ClientVersion() }

// Client exposes the Engine client for diagnostics and tests.
func (m *Manager) Client() *client.Client { return m.cli }

// Describe names the backend and the Engine API it speaks.
func (m *Manager) Describe() []any {
	return []any{"backend", "docker", "docker_api", m.APIVersion()}
}

// Sockets are in the agents' host directories (AgentSpec.SocketDir), which
// their containers mount: they stay where they are when a container is
// made anew.
func (m *Manager) Sockets(specs []sandbox.AgentSpec) []sandbox.Socket {
	socks := make([]sandbox.Socket, 0, len(specs))
	for _, s := range specs {
		socks = append(socks, s.Socket(filepath.Join(s.SocketDir(), proto.SocketName)))
	}
	return socks
}

// SetSpecs installs the agents' specs (start and config reload). A sandbox
// whose spec changed is recreated on its next use, not now, so calls in
// flight finish on the container they started in. The launchers follow
// the specs' tools at once: that needs no new container. A new agent's
// sandbox is starting (not yet verified) until Up, Sync or its first call
// brings it up.
func (m *Manager) SetSpecs(specs []sandbox.AgentSpec) error {
	return m.agents.Configure(specs, func(b *Sandbox, s sandbox.AgentSpec, changed bool) error {
		if err := s.Validate(); err != nil {
			// Nothing can bring it up, and nothing is written for it (a
			// relative path would land in the gateway's directory).
			b.boot.end(notStarted(s.Agent, err))
			return nil
		}
		if changed {
			b.h.MarkStale()
		}
		if err := sandbox.WriteLaunchers(s.ToolsBinDir(), s.Tools, s.LauncherTarget()); err != nil {
			return fmt.Errorf("agent %s: %w", s.Agent, err)
		}
		return nil
	})
}

func (m *Manager) spec(agent string) (sandbox.AgentSpec, bool) { return m.agents.Spec(agent) }

// Sandbox returns the agent's sandbox, creating, starting or recreating its
// container when it is missing, stopped or out of date. While the sandbox
// is starting the call waits for it (at most startWait); a sandbox that
// could not be started is tried once more for the call, and its failure,
// wrapping gateway.ErrSandboxUnavailable, is the call's error. Only a
// container verified as the agent's (name, instance, spec) is returned.
func (m *Manager) Sandbox(ctx context.Context, agent string) (gateway.Sandbox, error) {
	b, spec, ok := m.agents.Lookup(agent)
	if b != nil {
		if err := b.boot.wait(ctx, agent); err != nil {
			return nil, err
		}
		if st, _ := b.boot.state(); st == "" && !b.h.Stale() {
			return b, nil
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w for agent %q", sandbox.ErrNotConfigured, agent)
	}
	// Out of date with calls in flight: the call waits for the new
	// container (Sandbox.enter) instead of cutting them.
	if _, err := m.Sync(ctx, spec); err != nil {
		if !errors.Is(err, gateway.ErrSandboxUnavailable) {
			err = notStarted(agent, err)
		}
		return nil, err
	}
	b, _, _ = m.agents.Lookup(agent)
	// Another call's attempt may be under way.
	if err := b.boot.wait(ctx, agent); err != nil {
		return nil, err
	}
	if err := b.boot.failure(); err != nil {
		return nil, err
	}
	return b, nil
}

// Ensure makes the agent's container exist, match spec and run: a container
// with the same spec is re-attached (and started if stopped); otherwise it
// is removed and created again. The host workspace is the same either way.
func (m *Manager) Ensure(ctx context.Context, spec sandbox.AgentSpec) (*Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	b, lock := m.agents.Register(spec)
	if err := m.ensureBox(ctx, b, lock, spec); err != nil {
		return nil, err
	}
	return b, nil
}

func (m *Manager) ensureBox(ctx context.Context, b *Sandbox, lock *sync.Mutex, spec sandbox.AgentSpec) error {
	b.boot.begin()
	lock.Lock()
	defer lock.Unlock()
	return m.ensureLocked(ctx, b, spec, nil)
}

// ensureLocked is ensureBox under the agent's lock; seen, when not nil, is
// what a survey of the Engine found for a batch (Up).
func (m *Manager) ensureLocked(ctx context.Context, b *Sandbox, spec sandbox.AgentSpec, seen *survey) error {
	id, err := m.ensure(ctx, spec, seen)
	if err != nil {
		err = notStarted(spec.Agent, err)
		// A lost Engine says nothing of a container already verified: its
		// warm executor may answer still. Anything else fails the sandbox.
		if st, _ := b.boot.state(); st != "" || !errors.Is(err, errEngine) {
			b.boot.end(err)
		}
		return err
	}
	b.h.Set(id, spec)
	b.boot.end(nil)
	return nil
}

// keeps reports whether ensure would keep the agent's current container
// (same spec label) rather than recreate it.
func (m *Manager) keeps(ctx context.Context, spec sandbox.AgentSpec) (bool, error) {
	cfg, _, err := m.containerConfig(ctx, spec, nil)
	if err != nil {
		return false, err
	}
	existing, err := m.findByName(ctx, m.ContainerName(spec.Agent))
	if err != nil {
		return false, err
	}
	return existing != nil && existing.Labels[LabelSpec] == cfg.Labels[LabelSpec] && m.owns(existing), nil
}

func (m *Manager) ensure(ctx context.Context, spec sandbox.AgentSpec, seen *survey) (string, error) {
	uid, gid, _ := sandbox.ParseUser(spec.UserOrDefault())
	if err := prepareHostDirs(spec, uid, gid); err != nil {
		return "", err
	}
	cfg, hc, err := m.containerConfig(ctx, spec, seen)
	if err != nil {
		return "", err
	}
	name := m.ContainerName(spec.Agent)
	existing, err := m.found(ctx, seen, name)
	if err != nil {
		return "", err
	}
	if existing != nil && existing.Labels[LabelSpec] == cfg.Labels[LabelSpec] && m.owns(existing) {
		if existing.State == container.StateRunning {
			return existing.ID, nil
		}
		if _, err := m.cli.ContainerStart(ctx, existing.ID, client.ContainerStartOptions{}); err == nil {
			m.mu.Lock()
			delete(m.started, existing.ID) // started anew
			m.mu.Unlock()
			awaitExecutor(ctx, spec.ExecDir(), uid)
			return existing.ID, nil
		}
		// Cannot start: fall through and recreate it.
	}
	if existing != nil {
		if !m.owns(existing) {
			return "", fmt.Errorf("a container named %s exists and is not managed by this toolgate instance (%s); remove or rename it", name, m.instance)
		}
		if _, err := m.cli.ContainerRemove(ctx, existing.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			return "", fmt.Errorf("removing outdated container %s: %w", name, err)
		}
	}
	created, err := m.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		return "", fmt.Errorf("creating container %s: %w", name, err)
	}
	if _, err := m.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("starting container %s: %w", name, err)
	}
	awaitExecutor(ctx, spec.ExecDir(), uid)
	return created.ID, nil
}

// executorStart bounds how long a started sandbox is given for its warm
// executor to answer before it counts as up anyway (calls then go through
// the Engine until the executor is there).
const executorStart = 10 * time.Second

// awaitExecutor waits, within executorStart, until the sandbox's executor
// answers: by then its init has started its egress and model forwarders
// too, so a sandbox that is up has them listening — a first call through
// an Engine exec could otherwise find nothing on the proxy port — and its
// calls take the fast path from the first.
func awaitExecutor(ctx context.Context, dir string, uid int) {
	ctx, cancel := context.WithTimeout(ctx, executorStart)
	defer cancel()
	for {
		if c, err := hostexec.Dial(ctx, dir, uid); err == nil {
			c.Close()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// containerConfig builds the container from the spec and labels it with
// the hash of everything that defines it, including the image id and the
// client binary's content (a rebuilt image or client means a new sandbox).
func (m *Manager) containerConfig(ctx context.Context, spec sandbox.AgentSpec, seen *survey) (*container.Config, *container.HostConfig, error) {
	img, err := m.imageOf(ctx, seen, spec.Image)
	if err != nil {
		return nil, nil, err
	}
	clientSum, err := m.sums.sum(spec.ClientBinary)
	if err != nil {
		return nil, nil, fmt.Errorf("toolgate-client binary: %w", err)
	}
	var launcherSum string
	if lb := spec.LauncherBinary(); lb != "" {
		if launcherSum, err = m.sums.sum(lb); err != nil {
			return nil, nil, fmt.Errorf("toolgate-launch binary: %w", err)
		}
	}
	imgEnv := img.Env
	uid, gid, _ := sandbox.ParseUser(spec.UserOrDefault())
	pids := spec.Pids
	cfg := &container.Config{
		Image:      spec.Image,
		Cmd:        sandbox.InitArgv(),
		Env:        append(spec.Env(), sandbox.PathEnv(imgEnv)),
		User:       fmt.Sprintf("%d:%d", uid, gid),
		WorkingDir: proto.WorkspacePath,
		Labels:     map[string]string{LabelManaged: "true", LabelAgent: spec.Agent, LabelInstance: m.instance},
	}
	if m.home != "" {
		cfg.Labels[LabelHome] = m.home
	}
	init := false
	hc := &container.HostConfig{
		NetworkMode:    "none",
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Init:           &init,
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: spec.Workspace, Target: proto.WorkspacePath},
			{Type: mount.TypeBind, Source: spec.ClientBinary, Target: proto.ClientPath, ReadOnly: true},
			{Type: mount.TypeBind, Source: spec.ToolsBinDir(), Target: proto.ToolsBinPath, ReadOnly: true},
			// The directory, not the socket: a restarted gateway's new
			// socket appears in it. Only this agent's directory.
			{Type: mount.TypeBind, Source: spec.SocketDir(), Target: proto.SocketDirPath, ReadOnly: true},
			// The warm executor's socket: the sandbox's to write, so the
			// host connects to it only through dialExecutor's checks.
			{Type: mount.TypeBind, Source: spec.ExecDir(), Target: proto.ExecDirPath},
			// Claude Code's managed settings registering the gate and the
			// tap: the one settings source the agent cannot switch off.
			// The whole directory, so the image's own (a disableAllHooks
			// in managed-settings.d) is hidden.
			{Type: mount.TypeBind, Source: spec.ClaudeDir(), Target: hooks.ManagedSettingsDir, ReadOnly: true},
		},
		Tmpfs: map[string]string{
			"/tmp":       "rw,nosuid,nodev,size=64m,mode=1777",
			proto.RunDir: fmt.Sprintf("rw,nosuid,nodev,noexec,size=1m,mode=0700,uid=%d,gid=%d", uid, gid),
		},
		Resources: cpuLimit(spec.CPUs),
	}
	hc.Resources.Memory = spec.Memory
	if pids > 0 {
		hc.PidsLimit = &pids
	}
	if lb := spec.LauncherBinary(); lb != "" {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: lb, Target: proto.LauncherPath, ReadOnly: true})
	}
	h := sha256.New()
	_ = json.NewEncoder(h).Encode([]any{specVersion, img.ID, clientSum, launcherSum, cfg, hc, mountedDirs(hc.Mounts)})
	cfg.Labels[LabelSpec] = hex.EncodeToString(h.Sum(nil))[:16]
	return cfg, hc, nil
}

// cfsPeriod is the CFS period a sandbox's CPU limit is enforced over.
// Docker's --cpus uses 100 ms: a sandbox that spent its quota early in a
// period (two cores burn a one-CPU quota in 50 ms) then stands still for
// the rest of it, and every call in flight waits those tens of ms (issue
// 13: 64 concurrent `exec true` are throttled in most periods). 10 ms
// bounds one stall at a tenth of that for the same share. Not shorter: the
// kernel hands quota to each CPU in 5 ms slices
// (sched_cfs_bandwidth_slice_us), so in a shorter period one CPU's slice
// could take a one-CPU sandbox's whole quota while its other runnable
// tasks wait on the next.
const cfsPeriod = 10_000 // µs

// minCFSQuota is the smallest quota the kernel (and the Engine) accepts.
const minCFSQuota = 1000 // µs

// cpuLimit is a limit of cpus CPUs (0: none) as a CFS quota over
// cfsPeriod: cpus means what Docker's --cpus means, quota/period = cpus.
// A cpus the short period cannot hold exactly — more than four decimals,
// or under 0.1, whose quota would be under the kernel's 1 ms — takes
// Docker's own period, 100 ms, and the quota --cpus would give.
func cpuLimit(cpus float64) container.Resources {
	if cpus <= 0 {
		return container.Resources{}
	}
	period := int64(cfsPeriod)
	quota := cpus * cfsPeriod
	if quota < minCFSQuota || math.Abs(quota-math.Round(quota)) > 1e-6 {
		period, quota = 100_000, math.Trunc(cpus*100_000)
	}
	return container.Resources{CPUPeriod: period, CPUQuota: int64(math.Round(quota))}
}

// mountedDirs names the directories a container binds by device and inode:
// one deleted and made again at the same path (a removed home, a fresh
// workspace) is a directory the running container cannot see — it keeps
// the old, gone one — so the sandbox must be made anew, not re-attached.
func mountedDirs(mounts []mount.Mount) []string {
	var ids []string
	for _, mt := range mounts {
		var st syscall.Stat_t
		if err := syscall.Stat(mt.Source, &st); err != nil {
			ids = append(ids, mt.Target+" missing")
			continue
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			ids = append(ids, fmt.Sprintf("%s %d:%d", mt.Target, st.Dev, st.Ino))
		}
	}
	return ids
}

// writeManagedSettings writes the managed settings every sandbox mounts
// (the gateway's; the sandbox user gets no write access to them).
func writeManagedSettings(dir string) error {
	doc, err := hooks.ManagedSettings(nil, hooks.GateCommand{Command: proto.ClientPath})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, hooks.ManagedSettingsFile)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, doc) {
		return nil
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, doc, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// prepareHostDirs creates the workspace, the tools/bin directory with the
// agent's launchers, the socket directory and the executor directory. As
// root, a workspace we create (or find owned by root) is given to the
// sandbox user so the agent can write it, and so is the executor directory
// (mode 0700); the other two stay the gateway's.
func prepareHostDirs(spec sandbox.AgentSpec, uid, gid int) error {
	if err := sandbox.WriteLaunchers(spec.ToolsBinDir(), spec.Tools, spec.LauncherTarget()); err != nil {
		return err
	}
	if err := os.MkdirAll(spec.SocketDir(), 0o755); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if err := writeManagedSettings(spec.ClaudeDir()); err != nil {
		return fmt.Errorf("claude code managed settings: %w", err)
	}
	if err := os.MkdirAll(spec.ExecDir(), 0o700); err != nil {
		return fmt.Errorf("executor directory: %w", err)
	}
	if os.Geteuid() == 0 {
		// Lchown: the path is the gateway's (its parent is not the
		// sandbox's), but never follow a link there anyway.
		if err := os.Lchown(spec.ExecDir(), uid, gid); err != nil {
			return fmt.Errorf("executor directory: %w", err)
		}
	}
	if err := os.MkdirAll(spec.Workspace, 0o755); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	fi, err := os.Stat(spec.Workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("workspace %s is not a directory", spec.Workspace)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && st.Uid == 0 && uid != 0 {
		if err := os.Chown(spec.Workspace, uid, gid); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	return nil
}

// owns reports whether c is a toolgate container of this instance.
func (m *Manager) owns(c *container.Summary) bool {
	return c.Labels[LabelManaged] == "true" && c.Labels[LabelInstance] == m.instance
}

// findByName returns the container with exactly this name, or nil.
func (m *Manager) findByName(ctx context.Context, name string) (*container.Summary, error) {
	res, err := m.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("name", "^/?"+regexp.QuoteMeta(name)+"$"),
	})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	for i, c := range res.Items {
		for _, n := range c.Names {
			if n == "/"+name {
				return &res.Items[i], nil
			}
		}
	}
	return nil, nil
}

// Status reports each configured agent's sandbox: starting or failed (with
// why) until its container is up, then the container's state. One listing
// answers for every container; a running one is inspected (since when)
// the first time it is seen.
func (m *Manager) Status(ctx context.Context) ([]sandbox.Status, error) {
	var cs map[string]*container.Summary
	out, err := m.agents.Status(func(a string, b *Sandbox) (sandbox.Status, error) {
		st := sandbox.Status{Agent: a, Waiting: b.h.Queue().Waiting(), InFlight: b.calls.Running()}
		var err error
		if st.State, err = b.boot.state(); err != nil {
			st.Error = err.Error()
		}
		if st.State != "" {
			return st, nil
		}
		if cs == nil {
			if cs, err = m.containers(ctx); err != nil {
				return st, err
			}
		}
		st.State = sandbox.StateMissing
		if c := cs[m.ContainerName(a)]; c != nil && m.owns(c) {
			st.ContainerID, st.Image, st.State = c.ID, c.Image, string(c.State)
			if c.State == container.StateRunning {
				st.StartedAt = m.startedAt(ctx, c.ID)
			}
		}
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	if cs != nil {
		m.mu.Lock()
		for id := range m.started { // forget containers gone
			if !slices.ContainsFunc(out, func(s sandbox.Status) bool { return s.ContainerID == id }) {
				delete(m.started, id)
			}
		}
		m.mu.Unlock()
	}
	return out, nil
}

// startedAt is when the running container id started (zero if the Engine
// cannot say).
func (m *Manager) startedAt(ctx context.Context, id string) time.Time {
	m.mu.Lock()
	t, ok := m.started[id]
	m.mu.Unlock()
	if ok {
		return t
	}
	ins, err := m.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || ins.Container.State == nil || !ins.Container.State.Running {
		return time.Time{}
	}
	t, _ = time.Parse(time.RFC3339Nano, ins.Container.State.StartedAt)
	m.mu.Lock()
	m.started[id] = t
	m.mu.Unlock()
	return t
}

// Remove deletes the agent's container (not its workspace).
func (m *Manager) Remove(ctx context.Context, agent string) error {
	c, err := m.findByName(ctx, m.ContainerName(agent))
	if err != nil || c == nil || !m.owns(c) {
		return err
	}
	if b, _, _ := m.agents.Lookup(agent); b != nil {
		b.h.MarkStale()
	}
	_, err = m.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	return err
}

// errEngine is wrapped by errors about an Engine that could not be asked.
// It says nothing about the container, which is left as it is (not marked
// for recreation): its warm executor may answer still.
var errEngine = errors.New("the Docker Engine is unreachable")

// engineWait bounds a question to the Engine about a container's state.
const engineWait = 5 * time.Second

func (m *Manager) unreachable(err error) error {
	return fmt.Errorf("%w at %s (the sandbox itself may be running): %v", errEngine, m.cli.DaemonHost(), err)
}
