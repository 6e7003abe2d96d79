package hookserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/hookcall"
)

// tap records a tap event with id the way the tap route does.
func tap(t *testing.T, hs *Server, agent, id string) (dup bool) {
	t.Helper()
	o := &gateway.Observation{Agent: agent, Type: gateway.KindHook, Tool: "Bash", Via: hookcall.ViaHook,
		Verdict: hookcall.DecisionReported, Detail: map[string]any{"event_id": id}}
	_, dup, err := hs.record(agent, id, o)
	if err != nil {
		t.Fatal(err)
	}
	return dup
}

// TestDedupStateAcrossRestarts: the ids recorded before a restart are
// known after it — from the state saved at Close, or after a crash from
// the last saved state plus the log written since its position — and a
// damaged or missing state falls back to reading the log.
func TestDedupStateAcrossRestarts(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	opts := e.opts
	home := t.TempDir()
	opts.StatePath, opts.Position = filepath.Join(home, StateFile), e.aw.Position
	hs, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if tap(t, hs, "demo", "ev-1") || !tap(t, hs, "demo", "ev-1") {
		t.Fatal("a second delivery of ev-1 was not a duplicate")
	}
	if err := hs.Close(); err != nil { // a clean stop saves
		t.Fatal(err)
	}
	if _, err := os.Stat(opts.StatePath); err != nil {
		t.Fatal(err)
	}

	// A crash: ev-2 is saved, ev-3 only in the log after the saved position.
	hs, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !tap(t, hs, "demo", "ev-1") || tap(t, hs, "demo", "ev-2") {
		t.Fatal("after a clean restart")
	}
	if err := hs.save(); err != nil {
		t.Fatal(err)
	}
	tap(t, hs, "demo", "ev-3")
	close(hs.stop) // the process dies: no final save
	<-hs.saved
	// A save cut short by the crash leaves its temporary file behind.
	leftover := filepath.Join(home, stateTempPrefix+"123")
	if err := os.WriteFile(leftover, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	hs, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ev-1", "ev-2", "ev-3"} {
		if !tap(t, hs, "demo", id) {
			t.Fatalf("%s recorded again after a crash", id)
		}
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("the leftover temporary file is still there: %v", err)
	}
	hs.Close()

	// A damaged state file: read the log instead, lose nothing.
	if err := os.WriteFile(opts.StatePath, []byte(`{"position":`), 0o600); err != nil {
		t.Fatal(err)
	}
	hs, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !tap(t, hs, "demo", "ev-3") {
		t.Fatal("ev-3 recorded again after the state was damaged")
	}
	hs.Close()
}

// TestDedupStateExpires: ids older than the window are not loaded, and
// the state is bounded by Recent per agent.
func TestDedupStateExpires(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	opts := e.opts
	opts.AuditDir = "" // the state alone
	opts.StatePath, opts.Position = filepath.Join(t.TempDir(), StateFile), e.aw.Position
	opts.Recent = 4
	old := time.Now().Add(-2 * DefaultDedupWindow).Unix()
	st := state{Agents: map[string][]seenID{"demo": {{ID: "old", At: old}, {ID: "fresh", At: time.Now().Unix()}}}}
	data, _ := json.Marshal(st)
	if err := os.WriteFile(opts.StatePath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	hs, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if hs.seen.has("demo", "old") || !hs.seen.has("demo", "fresh") {
		t.Fatal("expired id loaded, or fresh id lost")
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		tap(t, hs, "demo", id)
	}
	if err := hs.Close(); err != nil {
		t.Fatal(err)
	}
	saved, err := readState(opts.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, id := range saved.Agents["demo"] {
		ids = append(ids, id.ID)
	}
	if strings.Join(ids, ",") != "b,c,d,e" {
		t.Fatalf("saved ids %v, want the last 4 in order", ids)
	}
	if fi, err := os.Stat(opts.StatePath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode: %v %v", fi.Mode(), err)
	}
}
