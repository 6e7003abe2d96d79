// Package testenv gives tests what they share: a verdict on whether a real
// Docker Engine is reachable (required under TOOLGATE_REQUIRE_DOCKER=1, as
// in CI), the project's binaries built once per test process, and clean-up
// of the sandboxes and directories a test run created (Main).
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/cli/front"
	"github.com/toolgate/toolgate/internal/guest/launcher"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
	"github.com/toolgate/toolgate/internal/testenv/tmpdir"
)

var (
	dockerOnce  sync.Once
	dockerErr   error
	dockerAsked atomic.Bool // whether a test of this process wanted Docker
)

// DockerError reports why the Engine is unusable, nil when it answers.
func DockerError() error {
	dockerOnce.Do(func() {
		dockerAsked.Store(true)
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

// Long skips t under -short, saying what it needs: `go test -short ./...`
// runs in about a minute with no Docker, Postgres, Kubernetes or
// Chromium, and no build of the binaries (scripts/short.sh counts what it
// skipped). The README's test command runs everything.
func Long(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs " + needs)
	}
}

// NeedDocker skips a test when the Engine is unreachable, and fails it when
// TOOLGATE_REQUIRE_DOCKER=1: in CI a missing Docker is a failure, not a pass.
func NeedDocker(t testing.TB) {
	t.Helper()
	Long(t, "Docker")
	if err := DockerError(); err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_DOCKER") == "1" {
			t.Fatalf("TOOLGATE_REQUIRE_DOCKER=1 but: %v", err)
		}
		t.Skip(err)
	}
}

// Main runs a package's tests (for its TestMain: os.Exit(testenv.Main(m)))
// and then removes what testenv made for them that lives as long as the
// process: this run's sandboxes, when a test used Docker; the Postgres
// server; the binaries.
func Main(m *testing.M) int {
	code := m.Run()
	if dockerAsked.Load() && DockerError() == nil {
		_ = RemoveSandboxes(Prefix())
	}
	stopPostgres()
	_ = tmpdir.RemoveAll()
	return code
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Binaries builds the CLI — toolgate, the C front, and toolgate-cli, the Go
// CLI it runs — with toolgate-gateway and the static toolgate-client and
// toolgate-launch (C) once per test process, side by side as toolgate and
// the daemon expect, and returns the paths of toolgate and the client.
// Every test that runs toolgate so goes through the front.
// They live as long as the process (~119 MB): Main removes them, and a
// later test process what a killed one left (tmpdir).
func Binaries(t testing.TB) (toolgate, clientBin string) {
	t.Helper()
	Long(t, "the built binaries")
	buildOnce.Do(func() {
		buildDir, buildErr = tmpdir.New("toolgate-bin")
		if buildErr != nil {
			return
		}
		for _, b := range []struct{ out, pkg string }{
			{front.CLIBinary, "github.com/toolgate/toolgate/cmd/toolgate-cli"},
			{"toolgate-gateway", "github.com/toolgate/toolgate/cmd/toolgate-gateway"},
			{"toolgate-client", "github.com/toolgate/toolgate/cmd/toolgate-client"},
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, b.out), b.pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
		if buildErr = front.Build(filepath.Join(buildDir, "toolgate")); buildErr != nil {
			return
		}
		buildErr = launcher.Build(filepath.Join(buildDir, "toolgate-launch"))
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

// Strict reports whether a missing part fails a test instead of skipping
// it: in CI (CI=true) and under TOOLGATE_REQUIRE_DOCKER=1.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv("TOOLGATE_REQUIRE_DOCKER") == "1"
}

// NeedPrograms skips a test when a host program it needs is not on PATH,
// and fails it when Strict: the scripts install them (scripts/test.sh).
func NeedPrograms(t testing.TB, names ...string) {
	t.Helper()
	Long(t, strings.Join(names, ", "))
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if Strict() {
				t.Fatalf("%s is required here (CI=true or TOOLGATE_REQUIRE_DOCKER=1) but missing: %v", n, err)
			}
			t.Skipf("%s not installed: %v", n, err)
		}
	}
}

var (
	imageMu    sync.Mutex
	imageBuilt = map[string]error{}
)

// AgentImage builds the image of rootfs profile name, as its own tag,
// once per test process, and returns the tag. Downloads are cached across
// runs (rootfs.CacheDir), and a current image is not rebuilt, so only the
// first run on a machine pays for mmdebstrap and npm.
func AgentImage(t testing.TB, name string) string {
	Long(t, "agent image "+name)
	t.Helper()
	NeedDocker(t)
	NeedPrograms(t, "mmdebstrap", "npm")
	p, err := rootfs.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	imageMu.Lock()
	defer imageMu.Unlock()
	err, done := imageBuilt[name]
	if !done {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		var m *docker.Manager
		if m, err = docker.New(ctx, docker.Options{}); err == nil {
			_, err = m.BuildImage(ctx, p.Tag(), p, rootfs.Env{}, false)
			m.Close()
		}
		imageBuilt[name] = err
	}
	if err != nil {
		t.Fatalf("building the %s image: %v", name, err)
	}
	return p.Tag()
}

// NPMPackage installs npm package name@version into the image cache
// (once per version) and returns its directory. It skips without npm, and
// fails when Strict.
func NPMPackage(t testing.TB, name, version string) string {
	Long(t, "npm package "+name)
	t.Helper()
	NeedPrograms(t, "npm")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mods, err := rootfs.InstallNPM(ctx, rootfs.Env{}, name, version)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(mods, filepath.FromSlash(name))
}
