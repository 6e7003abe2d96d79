package systemtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auditpg"
	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestFleetCopy: with gateway.audit.postgres set, the daemon copies its
// calls' entries into a real PostgreSQL under its gateway id, off the call
// path; calls made while the database is down arrive after it is back.
func TestFleetCopy(t *testing.T) {
	p := testenv.NeedPostgres(t)
	dsn := p.NewDatabase(t)
	e := New(t, "fleet")
	agent := e.Agents[0]
	if err := e.Daemon.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Daemon = nil
	cfg, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	withPG := strings.Replace(string(cfg), "gateway:\n", fmt.Sprintf("gateway:\n  audit:\n    postgres: {dsn: %q}\n", dsn), 1)
	if err := os.WriteFile(e.ConfigPath, []byte(withPG), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Start()
	// The gateway id of the home: every row count finds must carry it.
	id, err := identity.GatewayID(e.Home)
	if err != nil {
		t.Fatal(err)
	}
	store, err := auditpg.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	count := func(want int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			hits, err := store.Find(context.Background(), auditindex.Query{Agent: agent, Limit: auditindex.MaxLimit})
			if err == nil && len(hits) == want {
				for _, h := range hits {
					if h.Gateway != id {
						t.Fatalf("row of gateway %q, want %q", h.Gateway, id)
					}
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d rows of %s (%v), want %d", len(hits), agent, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, err := e.Call(agent, "exec", map[string]any{"command": "true"}); err != nil {
		t.Fatal(err)
	}
	count(2) // decision and result

	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = p.Start()
		}
	}()
	// Calls do not wait for the database.
	if _, err := e.Call(agent, "exec", map[string]any{"command": "echo while-down"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	count(4)
	e.Verify()
}
