package gatewaycmd

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// TestAuditDirRefusesBrokenConfig: with a config that does not load, the
// audit commands must not quietly read HOME/logs (verify would report "ok"
// on a directory the daemon does not write).
func TestAuditDirRefusesBrokenConfig(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "gateway:\n  audit:\n    dri: " + filepath.Join(home, "elsewhere") + "\n" // typo: dri
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"audit", "verify"}, {"audit", "show", "x"}, {"audit", "tail"}} {
		root := NewRootCmd()
		root.SetArgs(append([]string{"--home", home}, args...))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "dri") {
			t.Errorf("%v with a broken config: %v, want the config error", args, err)
		}
	}
	// No config file at all: HOME/logs, as before.
	if err := os.Remove(filepath.Join(home, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	root := NewRootCmd()
	root.SetArgs([]string{"--home", home, "audit", "verify"})
	if err := root.Execute(); err != nil {
		t.Fatalf("verify without a config: %v", err)
	}
}

// TestAuditTailIDsWorkWithShow: the id `audit tail` prints is one `audit
// show` finds.
func TestAuditTailIDsWorkWithShow(t *testing.T) {
	home := t.TempDir()
	w, err := audit.Open(filepath.Join(home, "logs"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.Append(&gateway.Entry{ID: gateway.NewID(), Phase: gateway.PhaseDecision, Agent: "demo", Type: gateway.KindCore, Tool: "exec", Decision: "allow"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		r, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout := os.Stdout
		os.Stdout = pw
		root := NewRootCmd()
		root.SetArgs(append([]string{"--home", home}, args...))
		err = root.Execute()
		os.Stdout = stdout
		pw.Close()
		out, _ := io.ReadAll(r)
		return string(out), err
	}
	out, err := run("audit", "tail")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run("audit", "tail", "-n", "-1"); err == nil || !strings.Contains(err.Error(), "-n/--lines -1") {
		t.Fatalf("tail -n -1: %v, want an error naming the flag", err)
	}
	if out, err := run("audit", "tail", "-n", "0"); err != nil || out != "" {
		t.Fatalf("tail -n 0: %q, %v; want nothing", out, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("tail printed %q", out)
	}
	for _, line := range lines {
		id := strings.Fields(line)[1]
		if _, err := run("audit", "show", id); err != nil {
			t.Fatalf("audit show %s (from tail): %v", id, err)
		}
	}
}
