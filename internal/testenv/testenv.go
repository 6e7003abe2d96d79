// Package testenv gives tests what they share: a verdict on whether a real
// Docker Engine is reachable (required under TOOLGATE_REQUIRE_DOCKER=1, as
// in CI), the project's binaries built once per test process, and clean-up
// of the sandboxes a test run created.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/sandbox/docker"
)

var (
	dockerOnce sync.Once
	dockerErr  error
)

// DockerError reports why the Engine is unusable, nil when it answers.
func DockerError() error {
	dockerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := docker.New(ctx, docker.Options{})
		if err != nil {
			dockerErr = err
			return
		}
		m.Close()
	})
	return dockerErr
}

// NeedDocker skips a test when the Engine is unreachable, and fails it when
// TOOLGATE_REQUIRE_DOCKER=1: in CI a missing Docker is a failure, not a pass.
func NeedDocker(t testing.TB) {
	t.Helper()
	if err := DockerError(); err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_DOCKER") == "1" {
			t.Fatalf("TOOLGATE_REQUIRE_DOCKER=1 but: %v", err)
		}
		t.Skip(err)
	}
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Binaries builds toolgate and the static toolgate-client and
// toolgate-launch once per test process, side by side as the daemon expects,
// and returns the paths of the first two.
func Binaries(t testing.TB) (toolgate, clientBin string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "toolgate-bin-")
		if buildErr != nil {
			return
		}
		for _, b := range []struct{ out, pkg string }{
			{"toolgate", "github.com/toolgate/toolgate/cmd/toolgate"},
			{"toolgate-client", "github.com/toolgate/toolgate/cmd/toolgate-client"},
			{"toolgate-launch", "github.com/toolgate/toolgate/cmd/toolgate-launch"},
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, b.out), b.pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "toolgate"), filepath.Join(buildDir, "toolgate-client")
}

// Prefix is a per-process agent-name prefix, so parallel test binaries never
// share a sandbox and clean-up removes only this run's.
func Prefix() string { return fmt.Sprintf("t%d-", os.Getpid()) }

// RemoveSandboxes removes every toolgate container whose agent name starts with prefix.
func RemoveSandboxes(prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := docker.New(ctx, docker.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	cli := m.Client()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", docker.LabelManaged+"=true")})
	if err != nil {
		return err
	}
	for _, c := range res.Items {
		if strings.HasPrefix(c.Labels[docker.LabelAgent], prefix) {
			_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}
	return nil
}
