package gatewaycmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// TestAuditQuery: the index answers filters, free text, time windows and
// pages; bad flags are refused with a clear error; SQL-looking text is
// just text.
func TestAuditQuery(t *testing.T) {
	home := t.TempDir()
	w, err := audit.Open(filepath.Join(home, "logs"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 { // entry i is 30-i hours old
		e := &gateway.Entry{TS: time.Now().UTC().Add(-time.Duration(30-i) * time.Hour), ID: gateway.NewID(), Phase: gateway.PhaseDecision, Agent: []string{"demo", "other"}[i%2],
			Type: gateway.KindCore, Tool: "exec", Decision: []string{"allow", "deny", "allow"}[i%3], Rule: "r", Session: "S",
			Args: []byte(fmt.Sprintf(`{"command":"make target%d"}`, i))}
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := NewRootCmd()
		root.SetOut(&out)
		root.SetArgs(append([]string{"--home", home, "audit", "query"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	lines := func(s string) int { return len(strings.Split(strings.TrimSpace(s), "\n")) }
	if out, err := run("--agent", "demo", "--decision", "deny"); err != nil || lines(out) != 5 {
		t.Errorf("demo denials: %v\n%s", err, out)
	}
	out, err := run("--text", "target7", "--format", "json")
	var hit struct {
		Seq   int64
		Entry gateway.Entry
	}
	if err != nil || json.Unmarshal([]byte(out), &hit) != nil || !strings.Contains(string(hit.Entry.Args), "target7") || hit.Seq != 8 {
		t.Errorf("text: %v\n%s", err, out)
	}
	page1, _ := run("--limit", "10", "--format", "json")
	var last struct{ Seq int64 }
	_ = json.Unmarshal([]byte(strings.Split(strings.TrimSpace(page1), "\n")[9]), &last)
	if page2, err := run("--limit", "10", "--after", fmt.Sprint(last.Seq), "--newest=false"); err != nil || !strings.HasPrefix(page2, "11 ") {
		t.Errorf("second page: %v\n%s", err, page2)
	}
	if out, err := run("--text", `'); DROP TABLE entries; --`); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("SQL-looking text: %v %q", err, out)
	}
	// A window of 3.5h to 1.5h ago (the entries 3h and 2h old): how long
	// ago, or RFC 3339 times, on either end.
	at := func(ago time.Duration) string { return time.Now().Add(-ago).Format(time.RFC3339) }
	for _, w := range [][]string{
		{"--since", "210m", "--until", "90m"},
		{"--since", at(210 * time.Minute), "--until", at(90 * time.Minute)},
		{"--since", "0.15d", "--until", at(90 * time.Minute)},
	} {
		if out, err := run(append(w, "--newest=false")...); err != nil || lines(out) != 2 || !strings.HasPrefix(out, "28 ") {
			t.Errorf("window %q: %v\n%s", w, err, out)
		}
	}
	for _, bad := range [][]string{{"--limit", "-1"}, {"--limit", "20000"}, {"--format", "xml"}, {"--since", "yesterday"}, {"--until", "noon"},
		{"--since", "-2h"}, {"--since", "90m", "--until", "4h"}} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if out, err := run("--limit", "100"); err != nil || lines(out) != 30 {
		t.Errorf("after bad queries the index still has every entry: %v (%d lines)", err, lines(out))
	}
	// A session is one agent's: S, which both agents' entries name, is asked for with its agent.
	if out, err := run("--session", "S"); err == nil || !strings.Contains(err.Error(), "session S has entries of 2 agents (demo, other)") {
		t.Errorf("a session of two agents without --agent: %v\n%s", err, out)
	}
	if out, err := run("--session", "S", "--agent", "demo", "--limit", "100"); err != nil || lines(out) != 15 {
		t.Errorf("demo's session S: %v (%d lines)", err, lines(out))
	}
}
