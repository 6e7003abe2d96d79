package systemtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/proto/proof"
)

// A receipt of one agent's session, made from a real gateway's log, holds
// that session's entries and nothing of another agent's; `toolgate audit
// verify --receipt` and the standalone toolgate-verify find it valid with
// the gateway's key, and invalid — naming why — with a byte changed, an
// entry dropped, or another gateway's key.
func TestReceipts(t *testing.T) {
	e := New(t, "alice", "bob")
	alice, bob := e.Agents[0], e.Agents[1]
	ctx := t.Context()
	for i, who := range []struct{ agent, session, word string }{
		{alice, "task-1", "alpha"}, {bob, "task-2", "bravo-secret"}, {alice, "task-1", "charlie"}, {alice, "", "delta"}, {bob, "task-2", "echo-secret"},
	} {
		if _, err := e.Admin.WithSession(who.session).Call(ctx, who.agent, "exec", map[string]any{"argv": []string{"echo", who.word}}, nil, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := e.Daemon.FlushAudit(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "task-1.json")
	if out, code := e.CLI("", "audit", "receipt", "--session", "task-1", "-o", file); code != 0 {
		t.Fatalf("audit receipt: exit %d\n%s", code, out)
	}
	if out, code := e.CLI("", "audit", "receipt", "--session", "no-such-session"); code == 0 || !strings.Contains(out, "no entry of session no-such-session") {
		t.Fatalf("a receipt of a session the log does not have: exit %d %q", code, out)
	}
	var id struct{ Origin, Key string }
	out, code := e.CLI("", "id", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &id) != nil || !strings.HasPrefix(id.Key, id.Origin+"+") {
		t.Fatalf("toolgate id: exit %d %q", code, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := proof.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Entries) != 4 { // two calls: a decision and a result each
		t.Fatalf("%d entries in the receipt, want 4", len(r.Entries))
	}
	for _, en := range r.Entries {
		var f struct{ Agent, Session string }
		if json.Unmarshal([]byte(en.Line), &f) != nil || f.Agent != alice || f.Session != "task-1" {
			t.Fatalf("an entry of the receipt is not the session's: %s", en.Line)
		}
	}
	if strings.Contains(string(data), "secret") || strings.Contains(string(data), bob) {
		t.Fatal("the receipt reveals another agent's entries")
	}

	verifier := filepath.Join(dir, "toolgate-verify")
	if b, err := exec.Command("go", "build", "-o", verifier, "github.com/toolgate/toolgate/cmd/toolgate-verify").CombinedOutput(); err != nil {
		t.Fatalf("building toolgate-verify: %v\n%s", err, b)
	}
	check := func(name, receipt, key string, valid bool, why string) {
		t.Helper()
		out, code := e.CLI("", "audit", "verify", "--receipt", receipt, "--key", key)
		b, err := exec.Command(verifier, "--key", key, receipt).CombinedOutput()
		alone := 0
		if ee, ok := err.(*exec.ExitError); ok {
			alone = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		want := 0
		if !valid {
			want = 1
		}
		if code != want || alone != want || !strings.Contains(out, why) || !strings.Contains(string(b), why) {
			t.Errorf("%s: toolgate exit %d %q, toolgate-verify exit %d %q; want exit %d saying %q", name, code, out, alone, b, want, why)
		}
	}
	check("as made", file, id.Key, true, "valid: 4 entries")

	changed := filepath.Join(dir, "changed.json")
	if err := os.WriteFile(changed, []byte(strings.Replace(string(data), "charlie", "charlie!", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	check("a byte changed", changed, id.Key, false, "invalid")

	dropped := *r
	dropped.Entries = append([]proof.Entry{}, r.Entries[1:]...)
	b, err := dropped.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	droppedFile := filepath.Join(dir, "dropped.json")
	if err := os.WriteFile(droppedFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	check("an entry dropped", droppedFile, id.Key, false, "invalid")

	other := t.TempDir()
	keys, _, err := identity.Ensure(other)
	if err != nil {
		t.Fatal(err)
	}
	check("another gateway's key", file, keys.Current.Verifier, false, "invalid")

	// And the log itself: chain, tree and the signed checkpoints.
	if out, code := e.CLI("", "audit", "verify"); code != 0 || !strings.Contains(out, "checkpoints signed by "+id.Origin) {
		t.Fatalf("audit verify: exit %d %q", code, out)
	}
}
