package daemon

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/toolgate/toolgate/internal/testenv/timing"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// BenchmarkExecTrue compares `exec true` end to end: through the toolgate CLI
// (CLI → admin API → gateway → Engine API), the same without the CLI's
// process start, and `docker exec` (the path the seed describes).
//
//	go test ./internal/daemon -run '^$' -bench ExecTrue -benchtime 200x
func BenchmarkExecTrue(b *testing.B) {
	e := newEnv(b, "bench")
	a := e.agents[0]
	toolgate, _ := testenv.Binaries(b)
	args := map[string]any{"argv": []string{"true"}}
	if _, err := e.call(a, "exec", args); err != nil {
		b.Fatal(err)
	}
	b.Run("toolgate-cli", func(b *testing.B) {
		timing.Run(b, func() error {
			cmd := exec.Command(toolgate, "exec", a, "--", "true")
			cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.home)
			return cmd.Run()
		})
	})
	b.Run("admin-api", func(b *testing.B) {
		timing.Run(b, func() error { _, err := e.call(a, "exec", args); return err })
	})
	id := e.containerID(a)
	b.Run("docker-cli", func(b *testing.B) {
		timing.Run(b, func() error { return exec.Command("docker", "exec", id, "true").Run() })
	})
}

// BenchmarkReadWrite1MiB times write and read of a 1 MiB file through the
// admin API and the Engine's archive API.
func BenchmarkReadWrite1MiB(b *testing.B) {
	e := newEnv(b, "rw")
	a := e.agents[0]
	content := strings.Repeat("0123456789abcde\n", 1<<16)
	b.Run("write", func(b *testing.B) {
		timing.Run(b, func() error {
			_, err := e.call(a, "write", map[string]any{"path": "big.txt", "content": content})
			return err
		})
	})
	b.Run("read", func(b *testing.B) {
		timing.Run(b, func() error {
			_, err := e.call(a, "read", map[string]any{"path": "big.txt"})
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
	built, err := Build(c, nil)
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

// BenchmarkLargeFile compares, whole command against whole command on the
// same container, `toolgate write` and `toolgate read --binary` of a 16 MiB
// file with `docker cp` of it in and out (the goal: no slower).
//
//	go test ./internal/daemon -run '^$' -bench LargeFile -benchtime 10x
func BenchmarkLargeFile(b *testing.B) {
	e := newEnv(b, "large")
	a := e.agents[0]
	e.writeConfig("")
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfg = []byte(strings.ReplaceAll(string(cfg), "maxWrite: 16m", "maxWrite: 64m, maxReadFile: 64m"))
	if err := os.WriteFile(e.cfg, cfg, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := e.d.Reload(context.Background()); err != nil {
		b.Fatal(err)
	}
	toolgate, _ := testenv.Binaries(b)
	dir := b.TempDir()
	src := filepath.Join(dir, "big.bin")
	data := make([]byte, 16<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		b.Fatal(err)
	}
	id := e.containerID(a)
	cli := func(stdin string, args ...string) error {
		cmd := exec.Command(toolgate, args...)
		cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.home)
		if stdin != "" {
			f, err := os.Open(stdin)
			if err != nil {
				return err
			}
			defer f.Close()
			cmd.Stdin = f
		}
		if out, err := cmd.CombinedOutput(); err != nil && len(out) < 1000 {
			return fmt.Errorf("%v: %s", err, out)
		} else if err != nil {
			return err
		}
		return nil
	}
	b.Run("toolgate-write-16MiB", func(b *testing.B) {
		timing.Run(b, func() error { return cli(src, "write", a, "big.bin") })
	})
	b.Run("docker-cp-in-16MiB", func(b *testing.B) {
		timing.Run(b, func() error { return exec.Command("docker", "cp", src, id+":/workspace/big2.bin").Run() })
	})
	b.Run("toolgate-read-16MiB", func(b *testing.B) {
		timing.Run(b, func() error {
			cmd := exec.Command(toolgate, "read", "--binary", a, "big.bin")
			cmd.Env = append(os.Environ(), "TOOLGATE_HOME="+e.home)
			cmd.Stdout = io.Discard
			return cmd.Run()
		})
	})
	b.Run("docker-cp-out-16MiB", func(b *testing.B) {
		timing.Run(b, func() error {
			return exec.Command("docker", "cp", id+":/workspace/big.bin", filepath.Join(dir, "out.bin")).Run()
		})
	})
}
