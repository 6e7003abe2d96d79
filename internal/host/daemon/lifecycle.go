package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/lifecycle"
	"github.com/toolgate/toolgate/internal/lib/pidlock"
)

// sandboxOps is the lifecycle of this home's sandboxes as the gateway
// serving it runs them (the admin API): each action on the record, with
// who asked (by), before it is done.
func (d *Daemon) sandboxOps(by string) *lifecycle.Ops {
	return opsFor(d.config(), d.sandboxes, func(agent, tool string, detail map[string]any) (string, error) {
		detail["by"] = by
		return d.gw.Observe(&gateway.Observation{Agent: agent, Type: gateway.KindAdmin, Tool: tool, Via: gateway.ViaAdmin,
			Verdict: gateway.VerdictActed, Detail: detail})
	})
}

// opsFor is the lifecycle of the sandboxes of cfg's agents on b.
func opsFor(cfg *config.Config, b sandbox.Backend, record func(agent, tool string, detail map[string]any) (string, error)) *lifecycle.Ops {
	ops := &lifecycle.Ops{Backend: b, Name: config.BackendDocker, Instance: b.Instance(), Home: cfg.Home, Workspaces: map[string]string{}, Record: record}
	if cfg.Gateway.Sandbox.Backend == config.BackendKubernetes {
		ops.Name = config.BackendKubernetes
	}
	for name, a := range cfg.Agents {
		if ops.Name == config.BackendDocker {
			ops.Workspaces[name] = a.Workspace
		} else {
			ops.Workspaces[name] = "" // a claim, not a host directory
		}
	}
	return ops
}

// removeOnExit removes the agents' sandboxes as serve stops, with
// gateway.sandbox.removeOnExit or serve --rm: after the calls in flight
// have ended, before the audit log closes (each removal is recorded).
func (d *Daemon) removeOnExit(ctx context.Context) error {
	if !d.opts.RemoveOnExit && !d.config().Gateway.Sandbox.RemoveOnExit {
		return nil
	}
	return d.sandboxOps("serve --rm").RemoveAll(ctx)
}

// ErrServing is the error of OfflineSandboxes when a gateway serves the
// home: ask it (the admin API), which records what it does.
var ErrServing = errors.New("a gateway serves this home")

// OfflineSandboxes is the lifecycle of a home's sandboxes when no gateway
// serves it: the home's lock is held until release, so none starts
// meanwhile, and nothing is recorded (no gateway writes the log).
func OfflineSandboxes(ctx context.Context, home, configPath string) (ops *lifecycle.Ops, release func(), err error) {
	cfg, err := config.Load(home, configPath)
	if err != nil {
		return nil, nil, err
	}
	lock, err := pidlock.Take(filepath.Join(home, LockFile))
	var held *pidlock.HeldError
	if errors.As(err, &held) {
		return nil, nil, fmt.Errorf("%w (%s)", ErrServing, held.Holder())
	}
	if err != nil {
		return nil, nil, fmt.Errorf("locking the home: %w", err)
	}
	b, _, _, _, err := openBackend(ctx, cfg, home, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		lock.Release()
		return nil, nil, err
	}
	return opsFor(cfg, b, nil), func() { b.Close(); lock.Release() }, nil
}
