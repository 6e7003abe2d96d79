// Package lifecycle is what a person does to sandboxes (`toolgate sandbox
// ls|stop|rm|prune`, serve --rm): list every toolgate sandbox a backend
// holds, of this home and of others, stop or remove one, prune those
// nothing uses. The gateway serving a home runs it behind its admin API,
// each action on the audit record before it is done; with no gateway
// serving the home, the command runs it itself under the home's lock.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// Errors a caller tells apart (the admin API's status codes).
var (
	ErrUnknownAgent = errors.New("no such agent")
	ErrBusy         = errors.New("calls in flight")
	ErrNotRecorded  = errors.New("not recorded")
	ErrNoAction     = errors.New("no such sandbox action")
)

// Actions, as recorded (the entry's tool).
const (
	ToolStop   = "sandbox.stop"
	ToolRemove = "sandbox.rm"
	ToolPrune  = "sandbox.prune"
)

// Ops acts on one home's backend.
type Ops struct {
	Backend sandbox.Backend
	// Name is the backend's name (docker, kubernetes); Instance the id
	// that marks this home's sandboxes on it.
	Name, Instance string
	// Home is the home's directory: prune deletes workspaces only under it.
	Home string
	// Workspaces are the configured agents' host workspaces, by agent
	// (empty for a backend whose workspaces are claims).
	Workspaces map[string]string
	// Record puts an action on the audit record before it is done and
	// returns the entry's id; an error stops the action. Nil: no gateway
	// serves the home, and nothing is recorded.
	Record func(agent, tool string, detail map[string]any) (string, error)
}

// List is every toolgate sandbox the backend holds, with where it stands
// for this home and, for this home's configured agents, the calls in
// flight.
func (o *Ops) List(ctx context.Context) ([]api.Sandbox, error) { return o.list(ctx, true) }

// list is List, measuring the workspaces when sizes is set.
func (o *Ops) list(ctx context.Context, sizes bool) ([]api.Sandbox, error) {
	found, err := o.Backend.Find(ctx)
	if err != nil {
		return nil, err
	}
	st, err := o.Backend.Status(ctx)
	if err != nil {
		return nil, err
	}
	busy := map[string]sandbox.Status{}
	for _, s := range st {
		busy[s.Agent] = s
	}
	out := make([]api.Sandbox, 0, len(found))
	for _, f := range found {
		row := o.row(f, sizes)
		if row.Place == sandbox.PlaceHere {
			row.InFlight, row.Waiting = busy[f.Agent].InFlight, busy[f.Agent].Waiting
		}
		out = append(out, row)
	}
	return out, nil
}

func (o *Ops) configured(agent string) bool {
	_, ok := o.Workspaces[agent]
	return ok
}

func (o *Ops) row(f sandbox.Found, sizes bool) api.Sandbox {
	r := api.Sandbox{Agent: f.Agent, Place: f.Place(o.Instance, o.configured), Home: f.Home, Instance: f.Instance,
		Name: f.Name, ID: f.ID, Image: f.Image, State: f.State, Runtime: f.Runtime, Backend: o.Name,
		Created: f.Created, Workspace: f.Workspace, WorkspaceBytes: -1}
	if sizes && f.Workspace != "" {
		r.WorkspaceBytes = sandbox.DirBytes(f.Workspace)
	}
	return r
}

// agent is this home's configured agent's sandbox as found (ok false: it
// has none now), or ErrUnknownAgent.
func (o *Ops) agent(ctx context.Context, agent string) (api.Sandbox, bool, error) {
	if !o.configured(agent) {
		return api.Sandbox{}, false, fmt.Errorf("%w %q in this home's configuration", ErrUnknownAgent, agent)
	}
	rows, err := o.list(ctx, false)
	if err != nil {
		return api.Sandbox{}, false, err
	}
	for _, r := range rows {
		if r.Place == sandbox.PlaceHere && r.Agent == agent {
			return r, true, nil
		}
	}
	return api.Sandbox{Agent: agent, Place: sandbox.PlaceHere, Instance: o.Instance, Backend: o.Name, State: sandbox.StateMissing, WorkspaceBytes: -1}, false, nil
}

// Act runs the action named stop or rm (the admin API's and the
// command's word) on the agent's sandbox.
func (o *Ops) Act(ctx context.Context, action, agent string, a api.SandboxAction) (api.SandboxActed, error) {
	switch action {
	case "stop":
		return o.Stop(ctx, agent, a)
	case "rm":
		return o.Remove(ctx, agent, a)
	}
	return api.SandboxActed{}, fmt.Errorf("%w %q (stop, rm)", ErrNoAction, action)
}

// Stop stops the agent's sandbox; its next call starts it again. With
// calls in flight it refuses, unless a.Force.
func (o *Ops) Stop(ctx context.Context, agent string, a api.SandboxAction) (api.SandboxActed, error) {
	return o.act(ctx, agent, ToolStop, a, func() error { return o.Backend.Stop(ctx, agent) })
}

// Remove removes the agent's sandbox, and with a.Workspace its workspace
// (the configured directory); the next call makes the sandbox anew.
func (o *Ops) Remove(ctx context.Context, agent string, a api.SandboxAction) (api.SandboxActed, error) {
	return o.act(ctx, agent, ToolRemove, a, func() error { return o.Backend.Remove(ctx, agent) })
}

func (o *Ops) act(ctx context.Context, agent, tool string, a api.SandboxAction, do func() error) (api.SandboxActed, error) {
	ans := api.SandboxActed{Action: tool}
	row, has, err := o.agent(ctx, agent)
	if err != nil {
		return ans, err
	}
	if row.InFlight > 0 && !a.Force {
		return ans, fmt.Errorf("%w: %d in agent %s's sandbox (--force cuts them)", ErrBusy, row.InFlight, agent)
	}
	ws := ""
	if tool == ToolRemove && a.Workspace {
		if ws = o.Workspaces[agent]; ws == "" {
			return ans, fmt.Errorf("agent %s's workspace is not a directory on this host (a %s claim): remove it there", agent, o.Name)
		}
	}
	if !has && ws == "" {
		return ans, nil // nothing to do, and nothing to record
	}
	detail := map[string]any{"sandbox": row.Name, "state": row.State, "force": a.Force}
	if ws != "" {
		detail["workspace"] = ws
	}
	if err := o.record(&ans, agent, tool, detail); err != nil {
		return ans, err
	}
	if has {
		if err := do(); err != nil {
			return ans, err
		}
		ans.Sandboxes = []api.Sandbox{row}
	}
	if ws != "" {
		if err := os.RemoveAll(ws); err != nil {
			return ans, fmt.Errorf("removing the workspace: %w", err)
		}
		ans.Workspaces = []string{ws}
	}
	return ans, nil
}

// record puts one action on the record, when a gateway serves the home.
func (o *Ops) record(ans *api.SandboxActed, agent, tool string, detail map[string]any) error {
	if o.Record == nil {
		return nil
	}
	id, err := o.Record(agent, tool, detail)
	if err != nil {
		return fmt.Errorf("%w, so nothing was done: %w", ErrNotRecorded, err)
	}
	ans.Entries = append(ans.Entries, id)
	return nil
}

// Prune removes the sandboxes nothing uses: this home's of agents no
// longer configured, and those of homes that are gone (with a.Unknown,
// also of homes that did not say where they are). With a.Workspaces it
// removes the workspaces of this home's pruned agents too, when they lie
// under the home. a.DryRun says what would go.
func (o *Ops) Prune(ctx context.Context, a api.SandboxAction) (api.SandboxActed, error) {
	ans := api.SandboxActed{Action: ToolPrune, DryRun: a.DryRun}
	rows, err := o.list(ctx, false)
	if err != nil {
		return ans, err
	}
	var errs []error
	for _, r := range rows {
		if !sandbox.Prunable(r.Place, a.Unknown) {
			continue
		}
		ws := ""
		if a.Workspaces && r.Place == sandbox.PlaceUnused && o.under(r.Workspace) {
			ws = r.Workspace
		}
		if a.DryRun {
			ans.Sandboxes = append(ans.Sandboxes, r)
			if ws != "" {
				ans.Workspaces = append(ans.Workspaces, ws)
			}
			continue
		}
		detail := map[string]any{"sandbox": r.Name, "place": r.Place, "instance": r.Instance, "home": r.Home}
		if ws != "" {
			detail["workspace"] = ws
		}
		if err := o.record(&ans, r.Agent, ToolPrune, detail); err != nil {
			return ans, err
		}
		f := sandbox.Found{Agent: r.Agent, Instance: r.Instance, ID: r.ID, Name: r.Name}
		if err := o.Backend.RemoveFound(ctx, f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Name, err))
			continue
		}
		ans.Sandboxes = append(ans.Sandboxes, r)
		if ws != "" {
			if err := os.RemoveAll(ws); err != nil {
				errs = append(errs, fmt.Errorf("workspace %s: %w", ws, err))
				continue
			}
			ans.Workspaces = append(ans.Workspaces, ws)
		}
	}
	return ans, errors.Join(errs...)
}

// under reports whether dir lies inside the home (never the home itself):
// the only workspaces prune deletes, whatever a container's mount says.
func (o *Ops) under(dir string) bool {
	if dir == "" || o.Home == "" {
		return false
	}
	rel, err := filepath.Rel(o.Home, dir)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}

// RemoveAll removes the sandboxes of every configured agent (serve --rm,
// at shutdown, once the calls in flight have finished); workspaces stay.
func (o *Ops) RemoveAll(ctx context.Context) error {
	found, err := o.Backend.Find(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range found {
		if f.Place(o.Instance, o.configured) != sandbox.PlaceHere {
			continue
		}
		var ans api.SandboxActed
		err := o.record(&ans, f.Agent, ToolRemove, map[string]any{"sandbox": f.Name, "state": f.State, "force": true, "why": "serve --rm"})
		if err == nil {
			err = o.Backend.Remove(ctx, f.Agent)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", f.Agent, err))
		}
	}
	return errors.Join(errs...)
}
