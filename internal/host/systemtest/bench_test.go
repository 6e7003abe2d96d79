package systemtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv/timing"

	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/tmpdir"
)

// BenchmarkExecTrue compares `exec true` through the admin API (gateway →
// warm executor) with `docker exec` (the path the seed describes); the whole
// CLI command is BenchmarkGoalCLIExec's.
//
//	go test ./internal/host/systemtest -run '^$' -bench ExecTrue -benchtime 200x
func BenchmarkExecTrue(b *testing.B) {
	e := New(b, "bench")
	a := e.Agents[0]
	args := map[string]any{"argv": []string{"true"}}
	if _, err := e.Call(a, "exec", args); err != nil {
		b.Fatal(err)
	}
	b.Run("admin-api", func(b *testing.B) {
		timing.Run(b, func() error { _, err := e.Call(a, "exec", args); return err })
	})
	id := e.ContainerID(a)
	b.Run("docker-cli", func(b *testing.B) {
		timing.Run(b, func() error { return exec.Command("docker", "exec", id, "true").Run() })
	})
}

// BenchmarkReadWrite1MiB times write and read of a 1 MiB file through the
// admin API and the Engine's archive API.
func BenchmarkReadWrite1MiB(b *testing.B) {
	e := New(b, "rw")
	a := e.Agents[0]
	content := strings.Repeat("0123456789abcde\n", 1<<16)
	b.Run("write", func(b *testing.B) {
		timing.Run(b, func() error {
			_, err := e.Call(a, "write", map[string]any{"path": "big.txt", "content": content})
			return err
		})
	})
	b.Run("read", func(b *testing.B) {
		timing.Run(b, func() error {
			_, err := e.Call(a, "read", map[string]any{"path": "big.txt"})
			return err
		})
	})
}

// noopTool stands in for exec but does nothing, so Handle's own cost is what is measured.
type noopTool struct{}

func (noopTool) Name() string       { return "exec" }
func (noopTool) Kind() gateway.Kind { return gateway.KindCore }
func (noopTool) Prepare(call *gateway.Call, _ gateway.AgentInfo) error {
	call.Command, call.Path = "ls -la", "/workspace/src"
	return nil
}
func (noopTool) Run(context.Context, *gateway.Call, *gateway.RunEnv) (*gateway.Result, error) {
	return &gateway.Result{}, nil
}

// BenchmarkGatewayOverhead is the pipeline's own cost per call — identify,
// decide with the demo config's rules, bound the arguments, append the
// decision and the result to a durable audit log — with the tool doing
// nothing. "durable" waits for both entries' fsync; "durable-async-result"
// is production (the result is written behind the answer); "memory" shows
// the part that is not the disk.
func BenchmarkGatewayOverhead(b *testing.B) {
	cfg := `agents:
  demo:
    rules:
      - {name: r1, deny: 'tool == "exec" && command.contains("rm -rf")', reason: x}
      - {name: r2, deny: 'path.startsWith("/etc/shadow")', reason: x}
`
	home := b.TempDir()
	if err := os.WriteFile(home+"/config.yaml", []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	c, err := config.Load(home, "")
	if err != nil {
		b.Fatal(err)
	}
	built, err := assemble.Build(c, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	built.Snapshot.Tools["exec"] = noopTool{}
	args := json.RawMessage(`{"command":"ls -la","cwd":"src"}`)
	for _, sink := range []string{"durable", "durable-async-result", "memory"} {
		b.Run(sink, func(b *testing.B) {
			var s gateway.AuditSink = discard{}
			if sink != "memory" {
				w, err := audit.Open(b.TempDir(), audit.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				s = w
			}
			g := gateway.New(gateway.Options{Audit: s, BoundArgs: audit.NewBounder(1024).Bound,
				AsyncResults: sink == "durable-async-result"}, built.Snapshot)
			timing.Run(b, func() error {
				_, err := g.Handle(context.Background(), &gateway.Call{Agent: "demo", Tool: "exec", Args: args}, nil)
				return err
			})
		})
	}
}

type discard struct{}

func (discard) Append(*gateway.Entry) error { return nil }

// The large-file goals (issue 13): `toolgate write` and `toolgate read
// --binary`, each the whole CLI command as a process against a running
// gateway, beside `docker cp` of the same file in the same direction on the
// same container (the goal: a ratio of at most 1). peak-MiB is the command's
// own peak resident memory, which must not grow with the file.
//
//	go test ./internal/host/systemtest -run '^$' -bench 'GoalRead16|GoalWrite16' -benchtime 10x
//	go test ./internal/host/systemtest -run '^$' -bench 'GoalRead256|GoalWrite256' -benchtime 3x
func BenchmarkGoalWrite16MiB(b *testing.B)  { benchLargeFile(b, 16<<20, false) }
func BenchmarkGoalRead16MiB(b *testing.B)   { benchLargeFile(b, 16<<20, true) }
func BenchmarkGoalWrite256MiB(b *testing.B) { benchLargeFile(b, 256<<20, false) }
func BenchmarkGoalRead256MiB(b *testing.B)  { benchLargeFile(b, 256<<20, true) }

func benchLargeFile(b *testing.B, size int64, read bool) {
	e := New(b, "large")
	a := e.Agents[0]
	e.WriteConfig("")
	cfg, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		b.Fatal(err)
	}
	cfg = []byte(strings.ReplaceAll(string(cfg), "maxWrite: 16m", "maxWrite: 1g, maxReadFile: 1g"))
	if err := os.WriteFile(e.ConfigPath, cfg, 0o600); err != nil {
		b.Fatal(err)
	}
	if _, err := e.Daemon.Reload(context.Background()); err != nil {
		b.Fatal(err)
	}
	toolgate, _ := testenv.Binaries(b)
	dir := tmpdir.For(b) // up to 512 MiB: not left behind by a killed run
	src, out := filepath.Join(dir, "big.bin"), filepath.Join(dir, "out.bin")
	f, err := os.Create(src)
	if err == nil {
		_, err = io.CopyN(f, rand.Reader, size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	id := e.ContainerID(a)
	e.waitExecutor(b, a)
	// run runs a command with stdin from and stdout to files ("": none)
	// and returns its peak resident memory in MiB.
	run := func(stdin, stdout string, argv ...string) (float64, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.Home)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if stdin != "" {
			f, err := os.Open(stdin)
			if err != nil {
				return 0, err
			}
			defer f.Close()
			cmd.Stdin = f
		}
		if stdout != "" {
			f, err := os.Create(stdout)
			if err != nil {
				return 0, err
			}
			defer f.Close()
			cmd.Stdout = f
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		peak := watchPeak(cmd.Process.Pid)
		if err := cmd.Wait(); err != nil {
			return 0, fmt.Errorf("%s: %v: %.1000s", argv[0], err, stderr.String())
		}
		return peak(), nil
	}
	// The file to read is in place before either side reads it.
	if _, err := run(src, "", toolgate, "write", a, "big.bin"); err != nil {
		b.Fatal(err)
	}
	toolgateArgv, stdin, stdout := []string{toolgate, "write", a, "big.bin"}, src, ""
	dockerArgv := []string{"docker", "cp", src, id + ":/workspace/big2.bin"}
	if read {
		toolgateArgv, stdin, stdout = []string{toolgate, "read", "--binary", a, "big.bin"}, "", out
		dockerArgv = []string{"docker", "cp", id + ":/workspace/big.bin", filepath.Join(dir, "out-docker.bin")}
	}
	for _, side := range []struct {
		name          string
		argv          []string
		stdin, stdout string
	}{{"toolgate", toolgateArgv, stdin, stdout}, {"baseline", dockerArgv, "", ""}} {
		b.Run(side.name, func(b *testing.B) {
			peak := 0.0
			for b.Loop() {
				mib, err := run(side.stdin, side.stdout, side.argv...)
				if err != nil {
					b.Fatal(err)
				}
				peak = max(peak, mib)
			}
			b.ReportMetric(peak, "peak-MiB")
		})
	}
	if read && fileSum(b, out) != fileSum(b, src) {
		b.Fatal("the file read is not the file written")
	}
}

// watchPeak samples a process's peak resident memory (VmHWM) until it
// exits; the returned function stops and reports it in MiB. Not rusage:
// its maxrss counts the parent's memory the child was forked from.
func watchPeak(pid int) func() float64 {
	var kib atomic.Int64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for line := range strings.Lines(string(b)) {
					var n int64
					if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &n); err == nil {
						kib.Store(max(kib.Load(), n))
					}
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		<-stopped
		return float64(kib.Load()) / 1024
	}
}

func fileSum(b *testing.B, p string) [sha256.Size]byte {
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		b.Fatal(err)
	}
	return [sha256.Size]byte(h.Sum(nil))
}
