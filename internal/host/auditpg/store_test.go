package auditpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func entry(i int, agent string) *gateway.Entry {
	return &gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: gateway.PhaseDecision,
		Agent: agent, Type: gateway.KindCore, Tool: []string{"exec", "read", "write"}[i%3],
		Decision: []string{"allow", "allow", "deny"}[i%3], Rule: "default", Session: fmt.Sprintf("s%d", i/10),
		Args: []byte(fmt.Sprintf(`{"command":"echo word%d common 100%%_done"}`, i))}
}

// writeLog appends n entries to the log in dir through the real writer,
// rotating every few KiB so a feed crosses files.
func writeLog(t testing.TB, dir string, n int, agent string) {
	t.Helper()
	w, err := audit.Open(dir, audit.Options{MaxFileBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range n {
		if err := w.Append(entry(i, agent)); err != nil {
			t.Fatal(err)
		}
	}
}

func openStore(t testing.TB, dsn string) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// fileLines is the log in dir as written, in chain order.
func fileLines(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	if err := audit.ScanLinesAfter(dir, audit.Position{}, func(_ *gateway.Entry, line []byte, _ audit.Position) error {
		out = append(out, string(bytes.TrimSuffix(line, []byte("\n"))))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkChain: the files verify, the rows are exactly their lines in order
// (none lost, none doubled), and the rows verify as a chain on their own.
func checkChain(t *testing.T, s *Store, dir, gw string) {
	t.Helper()
	if rep, err := audit.Verify(dir); err != nil || !rep.OK() {
		t.Fatalf("%s: files do not verify: %+v %v", gw, rep, err)
	}
	want := fileLines(t, dir)
	got, err := s.Lines(context.Background(), gw)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, the files hold %d entries", gw, len(got), len(want))
	}
	for i := range want {
		if strings.TrimSuffix(got[i], "\n") != want[i] {
			t.Fatalf("%s: row %d differs from the file:\n%s\n%s", gw, i+1, got[i], want[i])
		}
	}
	copyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(copyDir, audit.CurrentFile), []byte(strings.Join(got, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.Verify(copyDir); err != nil || !rep.OK() || rep.Entries != len(want) {
		t.Fatalf("%s: the rows do not verify as a chain: %+v %v", gw, rep, err)
	}
}

func TestTwoGatewaysOneDatabase(t *testing.T) {
	dsn := testenv.NeedPostgres(t).NewDatabase(t)
	ctx := context.Background()
	a, b := t.TempDir(), t.TempDir()
	writeLog(t, a, 300, "alpha")
	writeLog(t, b, 200, "beta")
	s := openStore(t, dsn)
	for _, g := range []struct {
		dir, id string
		want    int
	}{{a, "gw-a", 300}, {b, "gw-b", 200}} {
		if n, err := s.CatchUp(ctx, g.dir, g.id); err != nil || n != g.want {
			t.Fatalf("%s: catch-up %d, %v", g.id, n, err)
		}
		if n, err := s.CatchUp(ctx, g.dir, g.id); err != nil || n != 0 {
			t.Fatalf("%s: second catch-up %d, %v", g.id, n, err)
		}
	}
	writeLog(t, a, 25, "alpha")
	// A second process (another store) resumes from the position saved in
	// the database, not from anything it remembers.
	s2 := openStore(t, dsn)
	if n, err := s2.CatchUp(ctx, a, "gw-a"); err != nil || n != 25 {
		t.Fatalf("resume: %d, %v", n, err)
	}
	checkChain(t, s, a, "gw-a")
	checkChain(t, s, b, "gw-b")

	for _, tc := range []struct {
		q    auditindex.Query
		want int
	}{
		{auditindex.Query{Limit: auditindex.MaxLimit}, 525},
		{auditindex.Query{Agent: "beta", Limit: auditindex.MaxLimit}, 200},
		{auditindex.Query{Agent: "alpha", Decision: "deny", Tool: "write", Limit: auditindex.MaxLimit}, 100 + 8},
		{auditindex.Query{Session: "s3", Agent: "alpha"}, 10},
		{auditindex.Query{Text: "word42 COMMON"}, 2},
		{auditindex.Query{Text: "nowhere"}, 0},
		{auditindex.Query{Text: `'; DROP TABLE toolgate_audit_entries; --`}, 0},
		{auditindex.Query{Text: `%`, Limit: auditindex.MaxLimit}, 525}, // a literal percent sign: every args has one
		{auditindex.Query{Text: `o%d`}, 0},                             // not a wildcard
		{auditindex.Query{Text: `d_ne`}, 0},                            // nor is _
		{auditindex.Query{Text: `%_done`, Limit: auditindex.MaxLimit}, 525},
		{auditindex.Query{Since: time.Now().Add(time.Hour)}, 0},
	} {
		got, err := s.Find(ctx, tc.q)
		if err != nil || len(got) != tc.want {
			t.Errorf("%+v: %d hits, %v; want %d", tc.q, len(got), err, tc.want)
		}
	}
	// Pages by arrival order, both directions, across gateways.
	var seen []int64
	for after := int64(0); ; {
		page, err := s.Find(ctx, auditindex.Query{Limit: 100, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, h := range page {
			seen = append(seen, h.N)
			if h.Gateway == "" || h.Entry.Hash == "" {
				t.Fatalf("hit without gateway or entry: %+v", h)
			}
		}
		after = page[len(page)-1].N
	}
	if len(seen) != 525 {
		t.Fatalf("paged %d hits, want 525", len(seen))
	}
	newest, err := s.Find(ctx, auditindex.Query{Newest: true, Limit: 1})
	if err != nil || len(newest) != 1 || newest[0].N != seen[len(seen)-1] || newest[0].Gateway != "gw-a" {
		t.Fatalf("newest: %+v %v", newest, err)
	}
	for _, q := range []auditindex.Query{{Limit: -1}, {Limit: auditindex.MaxLimit + 1}, {After: -5},
		{Since: time.Now(), Until: time.Now().Add(-time.Hour)}, {Decision: "denied"}, {Type: "exec"}} {
		if _, err := s.Find(ctx, q); !errors.Is(err, auditindex.ErrBadQuery) {
			t.Errorf("%+v: %v, want a bad-query error", q, err)
		}
	}
}

// TestSessionIsOneAgents: across the fleet as in one index
// (auditindex.Index.Find), a session two agents' entries name is asked for
// with its agent, and a parent matches only calls of the parent's agent.
func TestSessionIsOneAgents(t *testing.T) {
	dsn := testenv.NeedPostgres(t).NewDatabase(t)
	ctx := context.Background()
	dir := t.TempDir()
	w, err := audit.Open(dir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, graft := entry(0, "alpha"), entry(1, "beta")
	run.Session, graft.Session, graft.Parent = "S", "S", run.ID
	for _, e := range []*gateway.Entry{run, graft} {
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	s := openStore(t, dsn)
	if _, err := s.CatchUp(ctx, dir, "gw"); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Find(ctx, auditindex.Query{Session: "S"}); !errors.Is(err, auditindex.ErrSessionAgents) ||
		!strings.Contains(err.Error(), "(alpha, beta)") {
		t.Errorf("a session of two agents without its agent: %d hits, %v", len(hits), err)
	}
	for _, tc := range []struct {
		q    auditindex.Query
		want string
	}{
		{auditindex.Query{Session: "S", Agent: "beta"}, graft.ID},
		{auditindex.Query{Parent: run.ID}, ""},
	} {
		hits, err := s.Find(ctx, tc.q)
		var got []string
		for _, h := range hits {
			got = append(got, h.Entry.ID)
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("%+v: %v %v, want %q", tc.q, got, err, tc.want)
		}
	}
}

// A log whose saved position is gone (files pruned or replaced) is copied
// again from its first file; the entries already there are not doubled.
func TestPositionGoneCopiesAgainWithoutDuplicates(t *testing.T) {
	dsn := testenv.NeedPostgres(t).NewDatabase(t)
	ctx := context.Background()
	dir := t.TempDir()
	writeLog(t, dir, 100, "alpha")
	s := openStore(t, dsn)
	if n, err := s.CatchUp(ctx, dir, "gw"); err != nil || n != 100 {
		t.Fatalf("catch-up %d, %v", n, err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE toolgate_audit_positions SET hash = 'gone' WHERE gateway_id = 'gw'"); err != nil {
		t.Fatal(err)
	}
	writeLog(t, dir, 10, "alpha")
	if _, err := s.CatchUp(ctx, dir, "gw"); err != nil {
		t.Fatal(err)
	}
	checkChain(t, s, dir, "gw")
}

// The check of the issue: Postgres stopped under load from two gateways,
// started again; every entry arrives once and both chains verify.
// TOOLGATE_PG_OUTAGE sets the outage (default 3s; the check is 1m).
func TestOutageUnderLoad(t *testing.T) {
	p := testenv.NeedPostgres(t)
	dsn := p.NewDatabase(t)
	outage := 3 * time.Second
	if d, err := time.ParseDuration(os.Getenv("TOOLGATE_PG_OUTAGE")); err == nil {
		outage = d
	}
	dirs := map[string]string{"gw-a": t.TempDir(), "gw-b": t.TempDir()}
	writers := map[string]*audit.Writer{}
	for id, dir := range dirs {
		w, err := audit.Open(dir, audit.Options{MaxFileBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		writers[id] = w
	}
	ctx, cancel := context.WithCancel(context.Background())
	var follow, load sync.WaitGroup
	stores := map[string]*Store{}
	for id, dir := range dirs {
		s := openStore(t, dsn) // one per gateway, as on two hosts
		stores[id] = s
		follow.Go(func() { s.Follow(ctx, dir, id, 20*time.Millisecond, nil) })
	}
	var written atomic.Int64
	stopLoad := make(chan struct{})
	for id, w := range writers {
		load.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				if err := w.Append(entry(i, id)); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	before := written.Load()
	time.Sleep(outage)
	if written.Load() == before {
		t.Fatal("no entries were written while Postgres was down: the log must not wait for it")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	close(stopLoad)
	load.Wait()
	for _, w := range writers {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The followers catch up by themselves (their backoff is at most audit.MaxBackoff).
	deadline := time.Now().Add(audit.MaxBackoff + 30*time.Second)
	for id, dir := range dirs {
		head := writers[id].Position()
		for {
			pos, _, err := stores[id].Position(context.Background(), id)
			if err == nil && pos == head {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not catch up: at %+v, head %+v, %v", id, pos, head, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		checkChain(t, stores[id], dir, id)
	}
	cancel()
	follow.Wait()
	t.Logf("%d entries written by two gateways across a %s outage; all arrived once", written.Load(), outage)
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:hunter2@db:5432/x?sslmode=disable": "postgres://u:xxxxx@db:5432/x?sslmode=disable",
		"postgres://db/x?password=hunter2":               "postgres://db/x?password=xxxxx",
		"host=db user=u password=hunter2 dbname=x":       "host=db user=u password=xxxxx dbname=x",
		"postgres://u@db/x":                              "postgres://u@db/x",
	} {
		if got := Redact(in); got != want || strings.Contains(got, "hunter2") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := Open(context.Background(), "postgres://u:hunter2@[bad", nil); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad DSN: %v", err)
	}
}

// A gateway's role needs no CREATE once the tables exist: SELECT, INSERT
// and UPDATE on them and USAGE on the arrival sequence are enough.
func TestLeastPrivilegeRole(t *testing.T) {
	dsn := testenv.NeedPostgres(t).NewDatabase(t)
	ctx := context.Background()
	admin := openStore(t, dsn) // creates the tables
	role := fmt.Sprintf("gw_%d", time.Now().UnixNano())
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"GRANT SELECT, INSERT, UPDATE ON toolgate_audit_entries, toolgate_audit_positions TO " + role,
		"GRANT USAGE ON SEQUENCE toolgate_audit_entries_n_seq TO " + role,
	} {
		if _, err := admin.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	writeLog(t, dir, 50, "alpha")
	s := openStore(t, strings.Replace(dsn, "postgres@", role+"@", 1))
	if n, err := s.CatchUp(ctx, dir, "gw"); err != nil || n != 50 {
		t.Fatalf("feed as %s: %d, %v", role, n, err)
	}
	checkChain(t, s, dir, "gw")
}
