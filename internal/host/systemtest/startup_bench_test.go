package systemtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/timing"
)

// fleet is a home with n agents for the start-up benchmarks, served by the
// toolgate binary as a person runs it. Its containers, and the baseline's,
// are removed when the benchmark ends.
type fleet struct {
	b        *testing.B
	home     string
	agents   []string
	toolgate string
	cli      *client.Client
	serving  *exec.Cmd
}

// benchLabel marks the baseline's containers (docker run), for clean-up.
var benchLabel = "toolgate.bench=" + strconv.Itoa(os.Getpid())

func newFleet(b *testing.B, n int) *fleet {
	b.Helper()
	testenv.NeedDocker(b)
	toolgate, clientBin := testenv.Binaries(b)
	f := &fleet{b: b, home: b.TempDir(), toolgate: toolgate}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "gateway:\n  clientBinary: %s\n", clientBin)
	if n == 0 {
		cfg.WriteString("agents: {}\n")
	} else {
		cfg.WriteString("agents:\n")
	}
	for i := range n {
		a := fmt.Sprintf("%sfleet%02d", testenv.Prefix(), i)
		f.agents = append(f.agents, a)
		fmt.Fprintf(&cfg, AgentYAML, a)
	}
	if err := os.WriteFile(filepath.Join(f.home, "config.yaml"), []byte(cfg.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	store, err := auth.OpenStore(filepath.Join(f.home, auth.StoreFile))
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := store.Create(auth.ScopeAdmin, "", 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.home, api.TokenFile), []byte(token), 0o600); err != nil {
		b.Fatal(err)
	}
	if f.cli, err = client.New(client.FromEnv); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		f.stop()
		f.removeContainers()
		f.removeBaseline()
		f.cli.Close()
	})
	if n > 0 {
		// Once untimed: the image built, the agents' host directories made.
		if err := f.serve(); err != nil {
			b.Fatal(err)
		}
		if err := f.waitReady(); err != nil {
			b.Fatal(err)
		}
		f.stop()
	}
	return f
}

// serve starts `toolgate serve` on the fleet's home.
func (f *fleet) serve() error {
	cmd := exec.Command(f.toolgate, "--home", f.home, "serve")
	if err := cmd.Start(); err != nil {
		return err
	}
	f.serving = cmd
	return nil
}

// stop ends the daemon as a person would (SIGTERM); its sandboxes stay.
func (f *fleet) stop() {
	if f.serving == nil {
		return
	}
	_ = f.serving.Process.Signal(syscall.SIGTERM)
	_ = f.serving.Wait()
	f.serving = nil
}

// firstAnswer polls the admin API until it answers the agents' status.
func (f *fleet) firstAnswer() ([]api.AgentStatus, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := adminclient.Dial(f.home)
		if err == nil {
			var rows []api.AgentStatus
			if rows, err = c.Agents(context.Background()); err == nil {
				return rows, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the admin API did not answer: %w", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitReady polls the admin API until every agent's sandbox runs.
func (f *fleet) waitReady() error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rows, err := f.firstAnswer()
		if err != nil {
			return err
		}
		running := 0
		for _, r := range rows {
			switch r.State {
			case "running":
				running++
			case docker.StateFailed:
				return fmt.Errorf("agent %s failed: %s", r.Agent, r.Error)
			}
		}
		if running == len(f.agents) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d sandboxes running after 2 minutes", running, len(f.agents))
		}
		// Each status lists the containers: polled harder, it would slow
		// the Engine it measures.
		time.Sleep(50 * time.Millisecond)
	}
}

// containers are the fleet's sandbox containers.
// serveReady starts the gateway, waits until every agent runs, stops it
// and says how long it took to be ready.
func (f *fleet) serveReady() (time.Duration, error) {
	t0 := time.Now()
	if err := f.serve(); err != nil {
		return 0, err
	}
	err := f.waitReady()
	took := time.Since(t0)
	f.stop()
	return took, err
}

func (f *fleet) containers() []container.Summary {
	res, err := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", docker.LabelInstance+"="+docker.InstanceID(f.home))})
	if err != nil {
		f.b.Fatal(err)
	}
	return res.Items
}

func (f *fleet) removeContainers() {
	for _, c := range f.containers() {
		_, _ = f.cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

func (f *fleet) removeBaseline() {
	res, err := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", benchLabel)})
	if err != nil {
		f.b.Fatal(err)
	}
	for _, c := range res.Items {
		_, _ = f.cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

// runArgv is `docker run -d` with the flags of toolgate's container c:
// network, capabilities, security options, read-only root, user, working
// directory, environment, the same bind mounts, tmpfs, memory, CPU and
// pids limits, image and command.
func runArgv(c container.InspectResponse, name string) []string {
	hc := c.HostConfig
	argv := []string{"run", "-d", "--name", name, "--label", benchLabel, "--network", string(hc.NetworkMode),
		"--user", c.Config.User, "--workdir", c.Config.WorkingDir, "--init=false"}
	for _, cp := range hc.CapDrop {
		argv = append(argv, "--cap-drop", cp)
	}
	for _, so := range hc.SecurityOpt {
		argv = append(argv, "--security-opt", so)
	}
	if hc.ReadonlyRootfs {
		argv = append(argv, "--read-only")
	}
	for _, e := range c.Config.Env {
		argv = append(argv, "--env", e)
	}
	for _, m := range hc.Mounts {
		spec := fmt.Sprintf("type=%s,src=%s,dst=%s", m.Type, m.Source, m.Target)
		if m.ReadOnly {
			spec += ",readonly"
		}
		argv = append(argv, "--mount", spec)
	}
	for dst, opts := range hc.Tmpfs {
		argv = append(argv, "--tmpfs", dst+":"+opts)
	}
	if hc.Memory > 0 {
		argv = append(argv, "--memory", strconv.FormatInt(hc.Memory, 10))
	}
	if hc.NanoCPUs > 0 {
		argv = append(argv, "--cpus", strconv.FormatFloat(float64(hc.NanoCPUs)/1e9, 'f', -1, 64))
	}
	if hc.PidsLimit != nil {
		argv = append(argv, "--pids-limit", strconv.FormatInt(*hc.PidsLimit, 10))
	}
	return append(append(argv, c.Config.Image), c.Config.Cmd...)
}

// BenchmarkGoalStart30: `toolgate serve` with 30 agents from cold (no
// containers) until the admin API reports all 30 running, beside 30
// parallel `docker run -d` with exactly the flags of toolgate's containers
// (taken from them). Goal: toolgate ≤ 1.2× the baseline (p50-ms).
//
//	go test ./internal/host/systemtest -run '^$' -bench GoalStart30 -benchtime 3x
func BenchmarkGoalStart30(b *testing.B) {
	f := newFleet(b, 30)
	if _, err := f.serveReady(); err != nil {
		b.Fatal(err)
	}
	var argvs [][]string
	for i, c := range f.containers() {
		ins, err := f.cli.ContainerInspect(context.Background(), c.ID, client.ContainerInspectOptions{})
		if err != nil {
			b.Fatal(err)
		}
		argvs = append(argvs, runArgv(ins.Container, fmt.Sprintf("toolgate-bench-%d-%02d", os.Getpid(), i)))
	}
	b.Run("toolgate", func(b *testing.B) {
		timing.RunTimed(b, func() (time.Duration, error) {
			f.removeContainers()
			return f.serveReady()
		})
	})
	f.removeContainers()
	b.Run("baseline", func(b *testing.B) {
		timing.RunTimed(b, func() (time.Duration, error) {
			f.removeBaseline()
			t0 := time.Now()
			errs := make([]error, len(argvs))
			var wg sync.WaitGroup
			for i, argv := range argvs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if out, err := exec.Command("docker", argv...).CombinedOutput(); err != nil {
						errs[i] = fmt.Errorf("docker run: %v: %s", err, out)
					}
				}()
			}
			wg.Wait()
			return time.Since(t0), errors.Join(errs...)
		})
	})
}

// BenchmarkGoalReattach30: `toolgate serve` restarted with 30 agents whose
// containers run, until the admin API reports all 30 running (process
// start, configuration, audit log and the re-attach), beside one
// `docker inspect` of the 30 containers (the least a re-attach must ask
// the Engine, with a process start like toolgate's). Goal: toolgate
// ≤ 300 ms (p50-ms).
//
//	go test ./internal/host/systemtest -run '^$' -bench GoalReattach30 -benchtime 5x
func BenchmarkGoalReattach30(b *testing.B) {
	f := newFleet(b, 30)
	if _, err := f.serveReady(); err != nil {
		b.Fatal(err)
	}
	b.Run("toolgate", func(b *testing.B) {
		timing.RunTimed(b, func() (time.Duration, error) {
			return f.serveReady()
		})
	})
	argv := []string{"inspect", "--format", "{{.State.Running}}"}
	for _, c := range f.containers() {
		argv = append(argv, c.ID)
	}
	b.Run("baseline", func(b *testing.B) {
		timing.Run(b, func() error {
			out, err := exec.Command("docker", argv...).Output()
			if err == nil && strings.Count(string(out), "true") != len(f.agents) {
				err = fmt.Errorf("not all running: %s", out)
			}
			return err
		})
	})
}

// BenchmarkGoalAdminReady: from `toolgate serve` starting to the admin
// API's first answer (the agents' status), with 30 agents from cold (their
// sandboxes are created meanwhile) beside the same with no agents. Goal:
// toolgate ≤ 200 ms (p50-ms), whatever the number of agents.
//
//	go test ./internal/host/systemtest -run '^$' -bench GoalAdminReady -benchtime 5x
func BenchmarkGoalAdminReady(b *testing.B) {
	f30, f0 := newFleet(b, 30), newFleet(b, 0)
	firstAnswer := func(f *fleet) (time.Duration, error) {
		t0 := time.Now()
		if err := f.serve(); err != nil {
			return 0, err
		}
		rows, err := f.firstAnswer()
		took := time.Since(t0)
		if err == nil && len(rows) != len(f.agents) {
			err = fmt.Errorf("%d agents in the status, want %d", len(rows), len(f.agents))
		}
		if err == nil && len(f.agents) > 0 {
			err = f.waitReady() // nothing left being created when it stops
		}
		f.stop()
		return took, err
	}
	b.Run("toolgate", func(b *testing.B) {
		timing.RunTimed(b, func() (time.Duration, error) {
			f30.removeContainers()
			return firstAnswer(f30)
		})
	})
	b.Run("baseline", func(b *testing.B) {
		timing.RunTimed(b, func() (time.Duration, error) { return firstAnswer(f0) })
	})
}
