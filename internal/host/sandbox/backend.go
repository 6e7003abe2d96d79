package sandbox

import (
	"context"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Backend is a sandbox backend: one sandbox per configured agent, made
// from its AgentSpec, on whatever runs them (Docker on this host, pods on
// this node). The daemon drives every backend through this contract
// alone.
//
// Sandbox (gateway.Sandboxes) gives the agent's handle, bringing its
// sandbox up first when it is missing, stopped or out of date; its error
// wraps gateway.ErrSandboxUnavailable when the sandbox cannot come up. The
// handle stays valid across recreations: it always reaches the agent's
// current sandbox. What its methods promise:
//
//   - Exec runs argv as it is — no shell unless argv names one — as the
//     sandbox user, in Cwd (the sandbox's default, /workspace, when empty;
//     a missing one exits 126), with Env and the call's own variables
//     (AgentSpec.CallEnv) added. Output streams to Stdout and Stderr as it
//     comes; nil Stdin reads /dev/null. Exit codes are the command's (127
//     not found, 128+n killed by signal n). Argv runs in its own process
//     group and its whole tree ends with the call: at Timeout it is killed,
//     the outcome TimedOut with code 124; when ctx is cancelled, or the
//     caller's writer fails, it is killed before Exec returns (ctx's error,
//     the writer's error), with or without stdin.
//   - ReadFile and WriteFile resolve paths inside the sandbox (a symlink
//     never leads to the host), as the sandbox user; a relative path is
//     refused. ReadFile's limit cuts Data, not Size. WriteFile replaces the
//     file atomically (parents made, an existing file's mode kept). A
//     handle also implements gateway.StreamReader and gateway.StreamWriter:
//     files of any size, both ways, without holding them.
//   - A sandbox lost under a call (its container or pod removed or killed)
//     ends the call with an error wrapping ErrGone; the handle is then
//     stale, and the next call makes the sandbox anew on the same
//     workspace. A sandbox found gone before anything of a call ran is
//     made anew for that call.
type Backend interface {
	gateway.Sandboxes
	// SetSpecs installs the agents' specs (a start, a reload): agents not
	// among them are no longer configured. A sandbox whose spec changed
	// (AgentSpec.SameSandbox) is made anew on its next use or Sync, never
	// under a call in flight; the launchers follow the specs' tools at once.
	SetSpecs(specs []AgentSpec) error
	// Up brings the sandboxes of specs up in the background (a start) and
	// returns at once; calls to one still coming up wait for it. done is
	// closed once each is up or has failed (Status says why).
	Up(ctx context.Context, specs []AgentSpec) (done <-chan struct{})
	// Sync brings one sandbox in line with spec after a reload: made,
	// adopted or made anew now when no call runs in it. With calls in
	// flight a changed sandbox is made anew once they have finished (new
	// calls wait for it), or after spec.Drain at the latest: pending.
	Sync(ctx context.Context, spec AgentSpec) (pending bool, err error)
	// Remove deletes the agent's sandbox, not its workspace; a later call
	// makes it anew.
	Remove(ctx context.Context, agent string) error
	// Stop stops the agent's sandbox, keeping it where the backend can
	// (a stopped container; a pod cannot stop, so it is deleted, its
	// workspace claim kept): a later call starts it again. Calls in
	// flight in it are cut.
	Stop(ctx context.Context, agent string) error
	// Find lists every toolgate sandbox the backend holds, of this home
	// and of others (Found), for `toolgate sandbox ls` and prune.
	Find(ctx context.Context) ([]Found, error)
	// RemoveFound deletes a sandbox Find gave, of any home: never a
	// workspace, and never anything Find would not list.
	RemoveFound(ctx context.Context, f Found) error
	// Instance is the id that marks this home's sandboxes on the backend
	// (Found.Instance).
	Instance() string
	// Status reports each configured agent's sandbox, in agent order:
	// StateMissing when there is none, else its id and the backend's state.
	Status(ctx context.Context) ([]Status, error)
	// Sockets are where the gateway listens for the agents of specs, as far
	// as they are known now.
	Sockets(specs []AgentSpec) []Socket
	// Describe names the backend in the gateway's start log line
	// (slog key-value pairs).
	Describe() []any
	// Close releases the backend's connections; sandboxes keep running and
	// the next gateway adopts them.
	Close() error
}

// Preparer is a Backend with work to do before its sandboxes come up or
// are brought in line: an image to build.
type Preparer interface {
	Prepare(ctx context.Context, specs []AgentSpec) error
}

// SocketMover is a Backend whose agent sockets move when a sandbox is made
// anew (a socket in a pod's own volume): set is given the sockets each time,
// before the call that made the sandbox runs. The other backends' sockets
// stay where Sockets says.
type SocketMover interface {
	ServeSockets(set func([]Socket) error)
}

// Socket is where the gateway listens for one agent's sandbox, and the
// sandbox user who connects to it.
type Socket struct {
	Agent    string
	Path     string
	UID, GID int
}

// Socket is the agent's socket at path on this host.
func (s AgentSpec) Socket(path string) Socket {
	uid, gid, _ := ParseUser(s.UserOrDefault()) // validated with the config
	return Socket{Agent: s.Agent, Path: path, UID: uid, GID: gid}
}

// UpParallel bounds the sandboxes brought up or in line at once (Up, and
// a reload's Syncs). The backends overlap their set-up (mounts, cgroups,
// runc), so more in flight is faster, up to a point: 30 agents on 2 cores
// came up in 0.7-0.9× the time of 30 parallel `docker run -d` at 16,
// 0.9-1.0× at 8, no better at 32.
const UpParallel = 16
