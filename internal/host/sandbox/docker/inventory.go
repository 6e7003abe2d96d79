package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/proto"
)

// stopGrace is how long a stopped sandbox's processes get after SIGTERM
// before the Engine kills them: an agent's tools hold nothing that a
// longer wait would save, and the operator is waiting.
const stopGrace = 2 // seconds

// Find lists every toolgate container on the Engine, of every home.
func (m *Manager) Find(ctx context.Context) ([]sandbox.Found, error) {
	res, err := m.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelManaged+"=true"),
	})
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			return nil, m.unreachable(err)
		}
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	out := make([]sandbox.Found, 0, len(res.Items))
	for _, c := range res.Items {
		f := sandbox.Found{
			Agent: c.Labels[LabelAgent], Instance: c.Labels[LabelInstance], Home: c.Labels[LabelHome],
			ID: c.ID, Image: c.Image, State: string(c.State),
			Created: time.Unix(c.Created, 0),
		}
		if len(c.Names) > 0 {
			f.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		for _, mt := range c.Mounts {
			if mt.Destination == proto.WorkspacePath {
				f.Workspace = mt.Source
			}
		}
		out = append(out, f)
	}
	sandbox.SortFound(out)
	return out, nil
}

// Stop stops the agent's container (not its workspace); the next call
// starts it again.
func (m *Manager) Stop(ctx context.Context, agent string) error {
	c, err := m.findByName(ctx, m.ContainerName(agent))
	if err != nil || c == nil || !m.owns(c) || c.State != container.StateRunning {
		return err
	}
	grace := stopGrace
	_, err = m.cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &grace})
	return err
}

// RemoveFound deletes a container Find listed: only a toolgate one, and
// this home's through Remove, so its handle knows.
func (m *Manager) RemoveFound(ctx context.Context, f sandbox.Found) error {
	if f.Instance == m.instance {
		return m.Remove(ctx, f.Agent)
	}
	ins, err := m.cli.ContainerInspect(ctx, f.ID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ins.Container.Config == nil || ins.Container.Config.Labels[LabelManaged] != "true" {
		return fmt.Errorf("container %s is not toolgate's", f.ID)
	}
	_, err = m.cli.ContainerRemove(ctx, f.ID, client.ContainerRemoveOptions{Force: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}
