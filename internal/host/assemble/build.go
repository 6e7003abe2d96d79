// Package assemble turns a configuration into what the gateway runs on: the
// snapshot (core tools, plugin tools, the egress, hook and model tools, the
// policy engine deciding), the secrets, and the sandboxes' specs. It starts
// nothing: the daemon builds one at start and at each reload, the CLI's
// checks (config check, policy eval) build one to look at.
package assemble

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/coretools"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	_ "github.com/toolgate/toolgate/internal/host/door/modeldoor/scripted" // the scripted model provider kind
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/hookcall"
	"github.com/toolgate/toolgate/internal/host/netrule"
	"github.com/toolgate/toolgate/internal/host/plugin"
	_ "github.com/toolgate/toolgate/internal/host/plugin/kinds" // every plugin kind
	"github.com/toolgate/toolgate/internal/host/policy"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/host/upstream"
	"github.com/toolgate/toolgate/internal/proto"
)

// Built is everything derived from one configuration: what the gateway runs
// on, the policy engine behind it, and the sandboxes it wants.
type Built struct {
	Config   *config.Config
	Snapshot *gateway.Snapshot
	Policy   *policy.Engine
	Secrets  *secrets.Store
}

// Build derives the gateway snapshot and sandbox specs from a configuration.
// Upstream MCP servers' tools are built on ups, the daemon's pool; nil (a
// check by the CLI) builds them on a pool of their own that is never
// connected. Model spending is counted on meter, the daemon's, which
// outlives reloads; nil is a fresh one (nothing spent yet).
func Build(cfg *config.Config, ups *upstream.Pool, meter *modeldoor.Meter) (*Built, error) {
	if meter == nil {
		meter = modeldoor.NewMeter()
	}
	eng, err := policy.New(cfg)
	if err != nil {
		return nil, err
	}
	b := &Built{Config: cfg, Policy: eng, Snapshot: &gateway.Snapshot{
		Agents: map[string]gateway.AgentInfo{},
		Tools:  map[string]gateway.Tool{},
		ByKind: map[gateway.Kind]gateway.Tool{
			gateway.KindEgress: EgressTool(cfg),
			gateway.KindHook:   hookcall.Tool(),
		},
		Decider: eng,
	}}
	for name, a := range cfg.Agents {
		b.Snapshot.Agents[name] = gateway.AgentInfo{Name: name, Workspace: proto.WorkspacePath, HostDir: a.Workspace, AskTimeout: a.AskTimeout}
	}
	limits := func(agent string) config.Limits {
		if a, ok := cfg.Agents[agent]; ok {
			return a.Limits
		}
		return cfg.Defaults.Limits
	}
	if b.Secrets, err = secrets.Load(cfg.Home, cfg.Secrets); err != nil {
		return nil, err
	}
	for _, t := range coretools.New(limits, b.Secrets) {
		b.Snapshot.Tools[t.Name()] = t
	}
	if ups == nil {
		if ups, err = OpenUpstreams(cfg.Home); err != nil {
			return nil, err
		}
	}
	plugins, err := plugin.Build(cfg, plugin.Env{Secrets: b.Secrets, Shared: map[string]any{upstream.Kind: ups}})
	if err != nil {
		return nil, err
	}
	for name, t := range plugins {
		b.Snapshot.Tools[name] = t
	}
	mt, err := modeldoor.NewTool(cfg, b.Secrets, meter, modeldoor.Env{Egress: egressOptions(cfg)})
	if err != nil {
		return nil, err
	}
	b.Snapshot.ByKind[gateway.KindModel] = mt
	return b, nil
}

// OpenUpstreams is the pool of upstream MCP server connections, checked
// against the pins in HOME/pins.json.
func OpenUpstreams(home string) (*upstream.Pool, error) {
	pins, err := upstream.OpenPins(filepath.Join(home, upstream.PinsFile))
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return upstream.NewPool(pins), nil
}

// modelProviders are the providers an agent's sandbox may call.
func modelProviders(cfg *config.Config, a *config.Agent) []proto.ModelProvider {
	if a.Model == nil {
		return nil
	}
	var ps []proto.ModelProvider
	for _, name := range a.Model.Providers {
		ps = append(ps, proto.ModelProvider{Name: name, API: cfg.Gateway.Models[name].API})
	}
	return ps
}

// Specs are the sandboxes the configuration wants, each with the client binary mounted.
func (b *Built) Specs(client string) []sandbox.AgentSpec {
	var specs []sandbox.AgentSpec
	for name, a := range b.Config.Agents {
		specs = append(specs, sandbox.AgentSpec{
			Agent: name, Image: a.Image, Workspace: a.Workspace, User: a.User,
			Memory: a.MemoryBytes(), CPUs: a.Limits.CPUs, Pids: a.Limits.Pids, ClientBinary: client,
			Egress: a.Egress != nil, HostLoopback: hostLoopback(a.Egress), Models: modelProviders(b.Config, a), Tools: b.launchers(name), Drain: a.Limits.ExecTimeout,
		})
	}
	return specs
}

// hostLoopback are the egress rules that admit services on the host's
// loopback, which the sandbox must not take for its own.
func hostLoopback(e *config.Egress) []string {
	if e == nil {
		return nil
	}
	var out []string
	for _, s := range e.Allow {
		if r, err := netrule.ParseRule(s); err == nil && r.Loopback() {
			out = append(out, r.String())
		}
	}
	return out
}

// launchers are the plugin tools an agent's allowlist admits, each of which
// gets a command in the sandbox's /tools/bin: what is on its PATH is what it
// may call.
func (b *Built) launchers(agent string) []string {
	var names []string
	for name, t := range b.Snapshot.Tools {
		if t.Kind() != gateway.KindTool {
			continue
		}
		if b.Config.Agents[agent].AllowsTool(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Explain is the dry run behind `policy eval`: the decision a call would get,
// with every rule's result, without running or recording anything.
func (b *Built) Explain(call *gateway.Call) policy.Explanation {
	if _, refused := gateway.Prepare(b.Snapshot, call); refused != nil {
		return policy.Explanation{Decision: *refused}
	}
	return b.Policy.Explain(call)
}
