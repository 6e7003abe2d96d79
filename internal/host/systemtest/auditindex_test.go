package systemtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAuditIndexOneWriter (issue 25, item 9): against a gateway serving
// calls, `audit query`, `audit show` and `audit reindex` run at once — one
// reindex right after the index file was deleted — and every one of them
// succeeds; then the index holds each line of the log once, at its place
// in the chain. With the CLI catching the index up in its own process
// while the gateway's follower did the same, queries failed with "UNIQUE
// constraint failed: entries.seq" and a reindex left entries twice, at
// wrong positions.
func TestAuditIndexOneWriter(t *testing.T) {
	e := NewHome(t, Extra{}, "onewriter")
	a := e.Agents[0]
	logs := filepath.Join(e.Home, "logs")
	prefill(t, logs, a, 30_000)
	serve, c := e.ServeProcess()
	e.Admin = c
	toolgate, _ := testenv.Binaries(t)

	stop := make(chan struct{})
	var load sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	var ids []string // of calls answered, for audit show
	fail := func(what string, err error, out []byte) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf("%s: %v\n%s", what, err, out))
	}
	for w := range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := e.Call(a, "exec", map[string]any{"command": fmt.Sprintf("rm -rf /tmp/w%d-%d", w, i)})
				var we *api.Error
				if !errors.As(err, &we) || we.Rule != "no-rm-rf" {
					fail("a call under load", err, nil)
					return
				}
				mu.Lock()
				ids = append(ids, we.ID)
				mu.Unlock()
			}
		}()
	}
	run := func(args ...string) {
		cmd := exec.Command(toolgate, append([]string{"--home", e.Home, "audit"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			fail(strings.Join(args, " "), err, out)
		}
	}
	lastID := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) == 0 {
			return ""
		}
		return ids[len(ids)-1]
	}
	var cli sync.WaitGroup
	for range 3 {
		cli.Add(1)
		go func() {
			defer cli.Done()
			for range 12 {
				run("query", "--text", "tmp", "--newest", "--limit", "5")
				if id := lastID(); id != "" {
					run("show", id)
				}
			}
		}()
	}
	cli.Add(1)
	go func() {
		defer cli.Done()
		for range 3 {
			run("reindex")
		}
		if err := removeIndex(logs); err != nil {
			fail("deleting the index", err, nil)
		}
		run("reindex")
	}()
	cli.Wait()
	close(stop)
	load.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	stopServe(t, serve)
	compareIndexWithLog(t, logs)
}

// prefill writes n denied exec decisions of agent to the audit log in dir
// (rotated at 64 MiB, as by default) and returns their ids.
func prefill(t testing.TB, dir, agent string, n int) []string {
	t.Helper()
	w, err := audit.Open(dir, audit.Options{MaxFileBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range n {
		ids[i] = gateway.NewID()
		w.Enqueue(&gateway.Entry{TS: time.Now().UTC(), ID: ids[i], Phase: gateway.PhaseDecision, Agent: agent,
			Type: gateway.KindCore, Tool: "exec", Decision: "deny", Rule: "no-rm-rf",
			Args: []byte(fmt.Sprintf(`{"command":"rm -rf /tmp/pre%d"}`, i))})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// removeIndex deletes the index's files, as an operator clearing it would.
func removeIndex(dir string) error {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(dir, auditindex.File+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// stopServe stops a `toolgate serve` process as a person does, SIGTERM,
// and waits for it: its last catch-up of the index is done.
func stopServe(t testing.TB, serve *exec.Cmd) {
	t.Helper()
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("toolgate serve: %v", err)
		}
	case <-time.After(2 * time.Minute):
		_ = serve.Process.Signal(syscall.SIGQUIT) // its goroutines, on its stderr
		t.Fatal("toolgate serve did not stop")
	}
}

// compareIndexWithLog holds the index in dir to the log line by line:
// entry n of the chain is row n, as written, and there is no other row.
func compareIndexWithLog(t *testing.T, dir string) {
	t.Helper()
	var lines [][]byte
	if err := audit.ScanLinesAfter(dir, audit.Position{}, func(_ *gateway.Entry, line []byte, _ audit.Position) error {
		lines = append(lines, bytes.Clone(line))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	x, err := auditindex.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := x.CatchUp(); err != nil {
		t.Fatal(err)
	}
	rows, bad := 0, 0
	q := auditindex.Query{Limit: auditindex.MaxLimit}
	for {
		hits, err := x.Find(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			rows++
			if h.Seq != int64(rows) || h.Seq > int64(len(lines)) || !bytes.Equal(bytes.TrimSpace(h.Line), bytes.TrimSpace(lines[h.Seq-1])) {
				if bad++; bad <= 5 {
					t.Errorf("row %d has seq %d and line %.120s", rows, h.Seq, h.Line)
				}
			}
		}
		if len(hits) < q.Limit {
			break
		}
		q.After = hits[len(hits)-1].Seq
	}
	if rows != len(lines) || bad > 0 {
		t.Fatalf("the index has %d rows (%d out of place) for a log of %d lines", rows, bad, len(lines))
	}
}

// TestAuditCLIAsksTheGateway (issue 25, item 10): with a gateway running,
// `audit show`, `audit query` and `audit reindex` are answered by the light
// CLI from the gateway's index — they work with no toolgate-gateway
// installed beside toolgate, so none was started — and the answer covers
// the call made just before.
func TestAuditCLIAsksTheGateway(t *testing.T) {
	e := New(t, "asks")
	a := e.Agents[0]
	toolgate, _ := testenv.Binaries(t)
	alone := t.TempDir()
	for _, name := range []string{"toolgate", "toolgate-cli"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(toolgate), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(alone, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(alone, "toolgate"), append([]string{"--home", e.Home, "audit"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("audit %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	_, err := e.Call(a, "exec", map[string]any{"command": "rm -rf /tmp/asked"})
	var we *api.Error
	if !errors.As(err, &we) || we.ID == "" {
		t.Fatalf("want a denial with its id, got %v", err)
	}
	if out := run("show", we.ID); !strings.Contains(out, `"id": "`+we.ID+`"`) || !strings.Contains(out, "/tmp/asked") {
		t.Errorf("show of the call just made:\n%s", out)
	}
	if out := run("query", "--text", "asked", "--format", "json"); strings.Count(out, "\n") != 1 || !strings.Contains(out, we.ID) {
		t.Errorf("query by its words:\n%s", out)
	}
	if out := run("reindex"); !strings.HasPrefix(out, "indexed ") {
		t.Errorf("reindex: %s", out)
	}
	if out := run("query", "--agent", a, "--decision", "deny"); !strings.Contains(out, we.ID) {
		t.Errorf("query after the reindex:\n%s", out)
	}
}
