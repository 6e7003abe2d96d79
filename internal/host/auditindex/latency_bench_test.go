package auditindex

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv/timing"
)

// BenchmarkQueryLatency: p50/p99 of one answer from the index, for the
// queries `audit show`, `audit query` and the dashboard make, at the log
// size of benchEntries (100,000; TOOLGATE_BENCH_ENTRIES=1000000 for a
// million). The issue asks them well under 100 ms at a million entries.
func BenchmarkQueryLatency(b *testing.B) {
	n := benchEntries()
	dir := b.TempDir()
	first := bulkLog(b, dir, n)
	x, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	if got, err := x.CatchUp(); err != nil || got != n {
		b.Fatalf("feed: %d, %v", got, err)
	}
	since := time.Now().Add(-time.Hour)
	for _, q := range []struct {
		name string
		q    Query
		min  int // hits at least
	}{
		{"show-first", Query{ID: first}, 1},
		{"agent-deny-exec-since", Query{Agent: "agent4", Decision: "deny", Tool: "exec", Since: since, Limit: 100}, 100},
		{"session", Query{Session: fmt.Sprintf("s%d", n/100), Agent: "agent0"}, 1}, // a session is one agent's
		{"text", Query{Text: "pkg42", Limit: 100}, 1},
		{"newest-page", Query{Newest: true, Limit: 100}, 100},
		{"agent-newest-page", Query{Agent: "agent7", Newest: true, Limit: 100}, 100},
	} {
		b.Run(fmt.Sprintf("%s-%d", q.name, n), func(b *testing.B) {
			timing.Run(b, func() error {
				hits, err := x.Find(q.q)
				if err == nil && len(hits) < q.min {
					err = fmt.Errorf("%d hits, want at least %d", len(hits), q.min)
				}
				return err
			})
		})
	}
}
