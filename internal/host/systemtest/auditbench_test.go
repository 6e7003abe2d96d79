package systemtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testenv/timing"
)

// BenchmarkAuditCLI is issue 25's goal for the audit commands: `toolgate
// audit show ID` and `toolgate audit query --text WORD` as whole processes
// against a gateway running as people run it (`toolgate serve`), beside
// `grep -F` over the same log files (the baseline; goal ≤ 0.1× its time
// at a million entries). The log holds TOOLGATE_BENCH_ENTRIES entries
// (default 100,000):
//
//	TOOLGATE_BENCH_ENTRIES=1000000 go test ./internal/host/systemtest -run '^$' -bench AuditCLI -benchtime 20x -timeout 1h
func BenchmarkAuditCLI(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("TOOLGATE_BENCH_ENTRIES")); err == nil && v > 0 {
		n = v
	}
	e := NewHome(b, Extra{}, "auditbench")
	logs := filepath.Join(e.Home, "logs")
	ids := prefill(b, logs, e.Agents[0], n)
	serve, _ := e.ServeProcess()
	defer stopServe(b, serve)
	toolgate, _ := testenv.Binaries(b)
	files, err := filepath.Glob(filepath.Join(logs, "*.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	id := ids[n/2]
	word := fmt.Sprintf("pre%d", n/2) // in one entry's arguments
	audit := func(args ...string) func() error {
		return func() error {
			out, err := exec.Command(toolgate, append([]string{"--home", e.Home, "audit"}, args...)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v\n%s", err, out)
			}
			return nil
		}
	}
	grep := func(what string) func() error {
		return func() error {
			return exec.Command("grep", append([]string{"-F", what}, files...)...).Run()
		}
	}
	// The gateway indexes the log it found in the background; the first
	// question waits for that.
	if err := audit("show", id)(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"show", audit("show", id)},
		{"baseline-grep-show", grep(id)},
		{"query-text", audit("query", "--text", word)},
		{"baseline-grep-text", grep(word)},
	} {
		b.Run(fmt.Sprintf("%s-%d", c.name, n), func(b *testing.B) { timing.Run(b, c.fn) })
	}
}
