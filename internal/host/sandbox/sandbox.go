// Package sandbox is the sandbox backend contract (Backend: what the
// daemon drives, what each method promises) and what every backend
// shares: the agent's sandbox spec, the in-sandbox layout, the argv of
// the in-sandbox client that wraps each exec, the agents' registry and
// handles, the queue their calls wait in. The backends (sandbox/docker,
// sandbox/kube) implement Backend on top of it; sandbox/hostexec is the
// host side of the in-sandbox client they share.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

// AgentSpec is everything that defines an agent's sandbox. Two equal specs
// give the same sandbox; a changed spec means the sandbox is recreated.
type AgentSpec struct {
	Agent        string
	Image        string
	Workspace    string // host directory mounted read-write at /workspace
	User         string // numeric uid:gid inside the sandbox; default 1000:1000
	Memory       int64  // bytes; 0 = no limit
	CPUs         float64
	Pids         int64
	ClientBinary string // host path of the static toolgate-client
	// Egress starts the in-sandbox forwarder and points the proxy variables
	// at it (Env, CallEnv); the network mode stays none.
	Egress bool
	// Models are the model providers the sandbox reaches through the model
	// door: init starts its forwarder and Env points the clients at it.
	Models []proto.ModelProvider
	// HostLoopback are the egress allowlist's rules for services on the
	// gateway host's loopback ("localhost:8080"). Seen from the sandbox,
	// loopback is its own; with these set, loopback is proxied too and the
	// forwarder sends exactly these targets to the gateway (proto.EnvHostLoopback).
	HostLoopback []string
	// Tools are the agent's plugin tools: exactly these get a launcher in
	// ToolsBinDir. Not part of the sandbox's identity: the directory is a
	// bind mount, so a changed list is rewritten on the host, no recreate.
	Tools []string
	// Drain bounds how long a reload waits for the calls in flight before
	// it recreates a changed sandbox under them (the agent's exec timeout).
	// Not part of the sandbox's identity either.
	Drain time.Duration
}

// SameSandbox reports whether two specs give the same container (Tools and
// Drain aside).
func (s AgentSpec) SameSandbox(o AgentSpec) bool {
	s.Tools, o.Tools = nil, nil
	s.Drain, o.Drain = 0, 0
	return reflect.DeepEqual(s, o)
}

// Validate checks what a backend needs before it creates anything.
func (s AgentSpec) Validate() error {
	switch {
	case s.Agent == "":
		return errors.New("sandbox spec: agent name is empty")
	case s.Image == "":
		return fmt.Errorf("sandbox spec for agent %q: image is empty", s.Agent)
	case !filepath.IsAbs(s.Workspace):
		return fmt.Errorf("sandbox spec for agent %q: workspace %q is not an absolute host path", s.Agent, s.Workspace)
	case !filepath.IsAbs(s.ClientBinary):
		return fmt.Errorf("sandbox spec for agent %q: client binary %q is not an absolute host path", s.Agent, s.ClientBinary)
	}
	if _, _, err := ParseUser(s.UserOrDefault()); err != nil {
		return fmt.Errorf("sandbox spec for agent %q: %w", s.Agent, err)
	}
	return nil
}

// UserOrDefault is the sandbox user, 1000:1000 when unset.
func (s AgentSpec) UserOrDefault() string {
	if s.User == "" {
		return proto.DefaultUser
	}
	return s.User
}

// ToolsBinDir is the host directory mounted read-only at /tools/bin: a
// sibling of the workspace in the agent's state directory.
func (s AgentSpec) ToolsBinDir() string {
	return filepath.Join(filepath.Dir(filepath.Clean(s.Workspace)), "tools", "bin")
}

// ClaudeDir is the host directory mounted read-only over Claude Code's
// managed settings directory (/etc/claude-code): a sibling of the workspace.
func (s AgentSpec) ClaudeDir() string {
	return filepath.Join(filepath.Dir(filepath.Clean(s.Workspace)), "claude-code")
}

// SocketDir is the host directory holding the agent's gateway socket,
// mounted read-only at SocketDirPath: a sibling of the workspace.
func (s AgentSpec) SocketDir() string {
	return filepath.Join(filepath.Dir(filepath.Clean(s.Workspace)), "sock")
}

// Env is the container's environment: with egress, TOOLGATE_EGRESS=1 (init
// starts the forwarder), the host's loopback targets and the proxy
// variables, unattributed; with model providers, the model door's base
// URLs and placeholder keys.
func (s AgentSpec) Env() []string {
	env := proto.ModelEnv(s.Models, "", "")
	if !s.Egress {
		return env
	}
	env = append(append(env, s.proxyEnv(proto.ProxyURL(""))...), proto.EnvEgress+"=1")
	if len(s.HostLoopback) > 0 {
		env = append(env, proto.EnvHostLoopback+"="+strings.Join(s.HostLoopback, ","))
	}
	return env
}

// CallEnv is what the exec of call id adds to the environment: its id, the
// session hint it was called with and, with egress, proxy variables whose
// credentials name the call, so the connections its processes open are
// attributed to it; model base URLs carry the same hints.
func (s AgentSpec) CallEnv(id, session string) []string {
	env := []string{proto.EnvCallID + "=" + id}
	if proto.ValidCallID(session) {
		env = append(env, proto.SessionEnv+"="+session)
	}
	if s.Egress {
		env = append(env, s.proxyEnv(proto.ProxyURL(id))...)
	}
	return append(env, proto.ModelEnv(s.Models, id, session)...)
}

// DefaultPath is the PATH of an image that sets none (Docker's own default).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// PathEnv is the sandbox's PATH: /tools/bin, where the agent's plugin
// tools are, before the image's own PATH (from its environment, imageEnv),
// so any image works without knowing about toolgate.
func PathEnv(imageEnv []string) string {
	p := DefaultPath
	for _, kv := range imageEnv {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && v != "" {
			p = v
		}
	}
	if p == proto.ToolsBinPath || strings.HasPrefix(p, proto.ToolsBinPath+":") {
		return "PATH=" + p
	}
	return "PATH=" + proto.ToolsBinPath + ":" + p
}

// proxyEnv sets every proxy variable in both cases, as tools disagree on
// which they read. Loopback stays direct, unless the allowlist names
// services on the host's loopback: NO_PROXY would send those to the
// sandbox's own, so then loopback goes to the forwarder too, which
// tells the host's targets from the sandbox's.
func (s AgentSpec) proxyEnv(url string) []string {
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+url, strings.ToLower(k)+"="+url)
	}
	if len(s.HostLoopback) > 0 {
		return env
	}
	return append(env, "NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1")
}

// ParseUser parses a numeric "uid:gid" (gid defaults to uid). Names are
// refused: the host must chown the workspace without the sandbox's passwd.
func ParseUser(s string) (uid, gid int, err error) {
	us, gs, hasGid := strings.Cut(s, ":")
	if uid, err = strconv.Atoi(us); err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", s)
	}
	if !hasGid {
		return uid, uid, nil
	}
	if gid, err = strconv.Atoi(gs); err != nil || gid < 0 {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", s)
	}
	return uid, gid, nil
}

// Status is one agent's sandbox as the backend sees it (`toolgate agents`).
type Status struct {
	Agent       string
	ContainerID string // empty when the sandbox does not exist
	Image       string
	State       string // starting, failed, running, exited, missing …
	StartedAt   time.Time
	Error       string // why it failed to start
	Waiting     int    // calls waiting for their turn in its queue (Queue)
	InFlight    int    // calls running in it (Calls)
}

// States every backend reports alike (Status); others are the backend's.
const (
	StateMissing = "missing" // there is no sandbox
	StateRunning = "running" // it runs
)

// ErrGone is wrapped by the error of a call whose sandbox went away under
// it (removed, killed, its pod deleted): the sandbox is made anew on the
// next call.
var ErrGone = errors.New("sandbox gone")

// RunArgv wraps argv in the in-sandbox client, which enters cwd ("" keeps
// the sandbox's), adds env, puts argv in its own process group, enforces
// the timeout on the whole group and records the group under callID so
// KillArgv can end it. Both backends' exec APIs run it: the directory is
// the client's to enter, so a missing one reads the same as on the warm
// executor.
func RunArgv(callID string, timeout time.Duration, cwd string, env, argv []string) []string {
	out := make([]string, 0, len(argv)+9+2*len(env))
	out = append(out, proto.ClientPath, "run", "--timeout", timeout.String(), "--call", callID)
	if cwd != "" {
		out = append(out, "--cwd", cwd)
	}
	for _, kv := range env {
		out = append(out, "--env", kv)
	}
	out = append(out, "--")
	return append(out, argv...)
}

// KillArgv kills the process group of a call started with RunArgv.
func KillArgv(callID string) []string {
	return []string{proto.ClientPath, "kill", "--call", callID}
}

// InitArgv is the sandbox's PID 1.
func InitArgv() []string { return []string{proto.ClientPath, "init"} }

// LauncherBinary is the host path of toolgate-launch when it sits beside
// the client binary, as the build puts it; "" otherwise, and the launchers
// then run the client, which can only say that no launcher is beside it
// (the launcher is the one implementation of a plugin call, in C).
func (s AgentSpec) LauncherBinary() string {
	p := filepath.Join(filepath.Dir(s.ClientBinary), "toolgate-launch")
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	return ""
}

// LauncherTarget is what each /tools/bin/NAME links to inside the sandbox.
func (s AgentSpec) LauncherTarget() string {
	if s.LauncherBinary() != "" {
		return proto.LauncherPath
	}
	return proto.ClientPath
}
