package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		root := newRootCmd()
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
	root := newRootCmd()
	root.SetArgs([]string{"--home", home, "audit", "verify"})
	if err := root.Execute(); err != nil {
		t.Fatalf("verify without a config: %v", err)
	}
}
