package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditpg"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestAuditQueryAllGateways: two gateways' logs copied into one real
// PostgreSQL answer `audit query --all-gateways` with the same filters,
// each row naming its gateway; the DSN's password comes from a host secret
// and never shows in an error.
func TestAuditQueryAllGateways(t *testing.T) {
	dsn := testenv.NeedPostgres(t).NewDatabase(t)
	ctx := context.Background()
	store, err := auditpg.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Init(ctx); err != nil {
		t.Fatal(err)
	}
	for g, agent := range map[string]string{"edge-a": "demo", "edge-b": "other"} {
		dir := t.TempDir()
		w, err := audit.Open(dir, audit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			e := &gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: gateway.PhaseDecision, Agent: agent,
				Type: gateway.KindCore, Tool: "exec", Decision: []string{"allow", "deny"}[i%2], Rule: "r",
				Args: []byte(fmt.Sprintf(`{"command":"make %s%d"}`, g, i))}
			if err := w.Append(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := store.CatchUp(ctx, dir, g); err != nil {
			t.Fatal(err)
		}
	}

	home := t.TempDir()
	const password = "pg-pass-5a8e1c"
	writeHome := func(dsn string) {
		t.Helper()
		cfg := fmt.Sprintf("gateway:\n  audit:\n    postgres: {dsn: %q}\n", dsn)
		sec := fmt.Sprintf("secrets:\n  pgpw: {value: %q, agents: [\"*\"], tools: [audit.postgres]}\n", password)
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, "secrets.yaml"), []byte(sec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The test server trusts loopback, so the password is accepted unused.
	writeHome(strings.Replace(dsn, "postgres@", "postgres:{{secret:pgpw}}@", 1))
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := NewRootCmd()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"--home", home, "audit", "query", "--all-gateways"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	lines := func(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }
	out, err := run("--decision", "deny")
	if err != nil || len(lines(out)) != 10 {
		t.Fatalf("denials of both gateways: %v\n%s", err, out)
	}
	if !strings.Contains(out, "edge-a") || !strings.Contains(out, "edge-b") {
		t.Errorf("rows do not name their gateway:\n%s", out)
	}
	out, err = run("--agent", "other", "--text", "edge-b3", "--format", "json")
	var hit auditpg.Hit
	if err != nil || json.Unmarshal([]byte(out), &hit) != nil || hit.Gateway != "edge-b" || hit.Entry.Agent != "other" {
		t.Errorf("json: %v\n%s", err, out)
	}
	if out, err := run("--text", `'); DROP TABLE toolgate_audit_entries; --`); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("SQL-looking text: %v %q", err, out)
	}
	if _, err := run("--limit", "20000"); err == nil {
		t.Error("--limit 20000 accepted")
	}
	if out, err := run("--limit", "100"); err != nil || len(lines(out)) != 20 {
		t.Errorf("after the bad queries every entry is there: %v\n%s", err, out)
	}

	// A database that does not answer: an error, without the password.
	writeHome("postgres://postgres:{{secret:pgpw}}@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if _, err := run(); err == nil || strings.Contains(err.Error(), password) {
		t.Errorf("unreachable database: %v", err)
	}
	// A secret not granted to audit.postgres is refused by name.
	if err := os.WriteFile(filepath.Join(home, "secrets.yaml"),
		[]byte(fmt.Sprintf("secrets:\n  pgpw: {value: %q, agents: [\"*\"], tools: [exec]}\n", password)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(); err == nil || !strings.Contains(err.Error(), "pgpw") || strings.Contains(err.Error(), password) {
		t.Errorf("ungranted secret: %v", err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(); err == nil || !strings.Contains(err.Error(), "gateway.audit.postgres") {
		t.Errorf("not configured: %v", err)
	}
}
