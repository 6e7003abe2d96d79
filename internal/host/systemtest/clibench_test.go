package systemtest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/cli/front"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/timing"
)

// BenchmarkGoalCLIExec is issue 13's CLI goal: `toolgate exec AGENT -- true`
// as a whole process against a gateway running as people run it, `toolgate
// serve` in a process of its own ("toolgate", the C front; goal p50 ≤ 4
// ms), beside the Go CLI making the same call ("toolgate-cli": what the
// front saves) and the same admin API call made in this process over a
// fresh connection, as each CLI run makes one ("baseline": what is left
// when the client's process start and exit cost nothing). A gateway inside
// this benchmark's process would share its runtime with the loop that
// starts and waits for the CLI, and hides what goroutine hand-offs cost a
// daemon that sits idle between calls.
//
//	go test ./internal/host/systemtest -run '^$' -bench GoalCLIExec -benchtime 200x
//
// Where the Go CLI's time went (Dec 2026, 2 shared cores): its process
// start and exit ~2 ms of ~4.4 — an empty static Go program alone takes
// 1.1–1.3 ms from fork to reaped, ~1 ms of CPU of which most is 171 page
// faults (the runtime's heap, stacks and metadata), where a static musl C
// program takes 0.35 ms and 4 faults; the Go CLI's run took 328 faults,
// 2 ms of CPU and ~30 context switches, many of them the runtime's sysmon
// thread polling every 20 µs while the call waits. The front keeps the
// call and drops the runtime. The call, in the gateway: connect and
// request 0.15, decide 0.03, the decision's write and fsync 0.35, the
// checked dial to the warm executor 0.07, the sandbox's run ~1.2 — of
// which busybox's `true` itself, fork, exec and wait, ~0.75 — then result
// entry and answer 0.15.
func BenchmarkGoalCLIExec(b *testing.B) {
	e := New(b, "clibench")
	a := e.Agents[0]
	e.ServeProcess()
	toolgate, _ := testenv.Binaries(b)
	args := map[string]any{"argv": []string{"true"}}
	if _, err := e.Call(a, "exec", args); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "TOOLGATE_HOME="+e.Home)
	for _, bin := range []string{toolgate, filepath.Join(filepath.Dir(toolgate), front.CLIBinary)} {
		b.Run(filepath.Base(bin), func(b *testing.B) {
			timing.Run(b, func() error {
				cmd := exec.Command(bin, "exec", a, "--", "true")
				cmd.Env = env
				return cmd.Run()
			})
		})
	}
	b.Run("baseline", func(b *testing.B) {
		timing.Run(b, func() error {
			c, err := adminclient.Dial(e.Home)
			if err != nil {
				return err
			}
			_, err = c.Call(context.Background(), a, "exec", args, io.Discard, io.Discard)
			return err
		})
	})
}
