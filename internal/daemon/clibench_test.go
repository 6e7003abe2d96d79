package daemon

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/toolgate/toolgate/internal/adminclient"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/timing"
)

// BenchmarkGoalCLIExec is issue 13's CLI goal: `toolgate exec AGENT -- true`
// as a whole process against a running gateway ("toolgate"; goal p50 ≤ 4 ms)
// beside the same admin API call made in this process over a fresh
// connection, as each CLI run makes one ("baseline": what is left when the
// CLI's process start, initialisers and set-up cost nothing).
//
//	go test ./internal/daemon -run '^$' -bench GoalCLIExec -benchtime 200x
//
// Where a run's time went (Dec 2026, 2 shared cores, medians): the
// process's fork, exec and exit ~1.3 ms (an empty Go program); the Go
// runtime and 49 initialisers ~1 ms to main; cobra's tree 0.08 ms; the
// call ~2.5 ms, of it in the gateway: decide 0.07, the decision's fsync
// 0.46, the warm executor 1.87 (its checked dial 0.16, the sandbox's run
// of the command 1.71), result and answer 0.1. A raw-socket Go client
// without cobra or JSON is ~0.6 ms faster than toolgate; the rest is the
// process and the executor.
func BenchmarkGoalCLIExec(b *testing.B) {
	e := newEnv(b, "clibench")
	a := e.agents[0]
	toolgate, _ := testenv.Binaries(b)
	args := map[string]any{"argv": []string{"true"}}
	if _, err := e.call(a, "exec", args); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "TOOLGATE_HOME="+e.home)
	b.Run("toolgate", func(b *testing.B) {
		timing.Run(b, func() error {
			cmd := exec.Command(toolgate, "exec", a, "--", "true")
			cmd.Env = env
			return cmd.Run()
		})
	})
	b.Run("baseline", func(b *testing.B) {
		timing.Run(b, func() error {
			c, err := adminclient.Dial(e.home)
			if err != nil {
				return err
			}
			_, err = c.Call(context.Background(), a, "exec", args, io.Discard, io.Discard)
			return err
		})
	})
}
