package systemtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/upstream"
)

// TestCallInterruptedByCrashIsClosed: a daemon process killed (SIGKILL)
// while a call runs leaves its decision without a result; the next start
// records the call as interrupted, removes the temporary files of atomic
// writes cut short, and the chain verifies.
func TestCallInterruptedByCrashIsClosed(t *testing.T) {
	e := New(t, "crash")
	a := e.Agents[0]
	cmd, c := e.ServeProcess()
	go func() {
		_, _ = c.Call(context.Background(), a, "exec", map[string]any{"command": "sleep 60"}, nil, nil)
	}()
	var id string
	for deadline := time.Now().Add(time.Minute); id == ""; time.Sleep(50 * time.Millisecond) {
		_ = audit.Query(e.Home+"/logs", audit.Filter{Agent: a, Tool: "exec", Decision: "allow"}, func(en *gateway.Entry) error {
			if strings.Contains(string(en.Args), "sleep 60") {
				id = en.ID
			}
			return nil
		})
		if time.Now().After(deadline) {
			t.Fatal("the call's decision never reached the log")
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if got, err := audit.Find(e.Home+"/logs", id); err != nil || len(got) != 1 {
		t.Fatalf("before the restart the call has %d entries (%v), want its decision only", len(got), err)
	}

	// What a crash in the middle of atomic writes leaves in the home.
	leftovers := []string{auth.StoreFile + ".tmp", upstream.PinsFile + ".tmp", ".hooks-seen-123"}
	for _, f := range leftovers {
		if err := os.WriteFile(filepath.Join(e.Home, f), []byte(`{"half":`), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	e.Start()
	for _, f := range leftovers {
		if _, err := os.Stat(filepath.Join(e.Home, f)); !os.IsNotExist(err) {
			t.Errorf("leftover %s not removed at start: %v", f, err)
		}
	}
	got := e.Entries(audit.Filter{ID: id})
	if len(got) != 2 || got[1].Phase != gateway.PhaseResult || got[1].Error != audit.Interrupted {
		t.Fatalf("after the restart: %+v", got)
	}
	e.Verify()
}
