package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/kubeagents"
	"github.com/toolgate/toolgate/internal/host/policy"
)

// configPath is the configuration file serve reads.
func (d *Daemon) configPath() string {
	if d.opts.ConfigPath != "" {
		return d.opts.ConfigPath
	}
	return filepath.Join(d.opts.Home, "config.yaml")
}

// load reads the configuration file with the Agent resources served
// beside it.
func (d *Daemon) load() (*config.Config, error) {
	data, err := os.ReadFile(d.configPath())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	extras := d.extras
	d.mu.Unlock()
	return config.ParseWith(d.opts.Home, d.configPath(), data, extras)
}

// agentController runs the Agent controller, when there is one. Agents
// that cannot be listed (the CRD not applied, no access) stop the start:
// the operator asked for them.
func (d *Daemon) agentController() service {
	var loop task
	return service{name: "Agent controller", start: func(ctx context.Context) error {
		if d.agents == nil {
			return nil
		}
		if err := d.agents.Check(ctx); err != nil {
			return err
		}
		loop.run(func(ctx context.Context) {
			if err := d.agents.Run(ctx); err != nil {
				d.log.Error("Agent controller stopped", "err", err)
			}
		})
		return nil
	}, stop: loop.end}
}

// agentsGateway is the daemon as the Agent controller sees it.
type agentsGateway struct{ d *Daemon }

// Serve checks each Agent on its own against the file (its fields, then
// its rules compiled), so one bad Agent costs only itself, then reloads
// with the good ones: they enter the same snapshot and policy as the
// file's agents.
func (g agentsGateway) Serve(ctx context.Context, extras []config.Extra) (map[string]error, error) {
	d := g.d
	data, err := os.ReadFile(d.configPath())
	if err != nil {
		return nil, err
	}
	if _, err := config.Parse(d.opts.Home, d.configPath(), data); err != nil {
		return nil, err
	}
	refused := map[string]error{}
	var good []config.Extra
	for _, x := range extras {
		one := []config.Extra{x}
		cfg, err := config.ParseWith(d.opts.Home, d.configPath(), data, one)
		if err == nil {
			_, err = policy.New(cfg)
		}
		if err != nil {
			refused[x.Name] = config.Attribute(err, one)
			continue
		}
		good = append(good, x)
	}
	d.mu.Lock()
	d.extras = good
	d.mu.Unlock()
	ans, err := d.Reload(ctx)
	if err != nil && len(ans.Failed) == 0 {
		return nil, err
	}
	for a, e := range ans.Failed {
		refused[a] = fmt.Errorf("%w: %w", kubeagents.ErrNotUp, e)
	}
	return refused, nil
}

func (g agentsGateway) Sandbox(ctx context.Context, agent string) (string, string, error) {
	return g.d.kube.PodOf(ctx, agent)
}
