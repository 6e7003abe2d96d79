package auditindex

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// benchEntries is the log size of the index benchmarks: 100,000 by
// default, TOOLGATE_BENCH_ENTRIES=1000000 for the million-entry figures.
func benchEntries() int {
	if n, err := strconv.Atoi(os.Getenv("TOOLGATE_BENCH_ENTRIES")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// bulkLog writes n entries through the audit writer's queue (one fsync per
// batch), agents and tools spread so filters select a few percent.
func bulkLog(b *testing.B, dir string, n int) string {
	w, err := audit.Open(dir, audit.Options{MaxFileBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	var first string
	for i := range n {
		e := &gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: gateway.PhaseDecision,
			Agent: fmt.Sprintf("agent%d", i%20), Type: gateway.KindCore, Tool: []string{"exec", "read", "write", "patch"}[i%4],
			Decision: []string{"allow", "allow", "allow", "allow", "deny"}[i%5], Rule: "default",
			Session: fmt.Sprintf("s%d", i/50), Args: []byte(fmt.Sprintf(`{"command":"go test ./pkg%d/... && echo done"}`, i%1000))}
		if i == 0 {
			first = e.ID
		}
		w.Enqueue(e)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return first
}

// BenchmarkIndex: feeding the index from the log (entries/s), showing the
// first call of the log and a filtered query, beside the same show done by
// scanning the files (the baseline the index replaces).
func BenchmarkIndex(b *testing.B) {
	n := benchEntries()
	dir := b.TempDir()
	first := bulkLog(b, dir, n)
	x, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	start := time.Now()
	if got, err := x.CatchUp(); err != nil || got != n {
		b.Fatalf("feed: %d, %v", got, err)
	}
	b.Logf("%d entries: feed %.0f entries/s", n, float64(n)/time.Since(start).Seconds())
	b.Run(fmt.Sprintf("show-first-%d", n), func(b *testing.B) {
		for b.Loop() {
			if hits, err := x.Find(Query{ID: first}); err != nil || len(hits) != 1 {
				b.Fatal(hits, err)
			}
		}
	})
	b.Run(fmt.Sprintf("query-agent-deny-exec-since-%d", n), func(b *testing.B) {
		since := time.Now().Add(-time.Hour)
		for b.Loop() {
			if _, err := x.Find(Query{Agent: "agent3", Decision: "deny", Tool: "exec", Since: since, Limit: 100}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("query-text-%d", n), func(b *testing.B) {
		for b.Loop() {
			if hits, err := x.Find(Query{Text: "pkg42", Limit: 100}); err != nil || len(hits) == 0 {
				b.Fatal(hits, err)
			}
		}
	})
	b.Run(fmt.Sprintf("baseline-show-first-by-file-scan-%d", n), func(b *testing.B) {
		for b.Loop() {
			if es, err := audit.Find(dir, first); err != nil || len(es) != 1 {
				b.Fatal(es, err)
			}
		}
	})
}
