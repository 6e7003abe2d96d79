package auditpg

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// BenchmarkFeed: copying a log into the fleet database (entries/s) beside
// the SQLite index fed from the same files, in the same run. The log holds
// 50,000 entries, TOOLGATE_BENCH_ENTRIES=N for another size.
func BenchmarkFeed(b *testing.B) {
	n := 50_000
	if v, err := strconv.Atoi(os.Getenv("TOOLGATE_BENCH_ENTRIES")); err == nil && v > 0 {
		n = v
	}
	dir := b.TempDir()
	w, err := audit.Open(dir, audit.Options{MaxFileBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		w.Enqueue(&gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: gateway.PhaseDecision,
			Agent: fmt.Sprintf("agent%d", i%20), Type: gateway.KindCore, Tool: []string{"exec", "read", "write", "patch"}[i%4],
			Decision: []string{"allow", "allow", "allow", "allow", "deny"}[i%5], Rule: "default",
			Session: fmt.Sprintf("s%d", i/50), Args: []byte(fmt.Sprintf(`{"command":"go test ./pkg%d/... && echo done"}`, i%1000))})
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run(fmt.Sprintf("postgres-%d", n), func(b *testing.B) {
		s := openStore(b, testenv.NeedPostgres(b).NewDatabase(b))
		for b.Loop() {
			b.StopTimer()
			if _, err := s.pool.Exec(ctx, "TRUNCATE toolgate_audit_entries, toolgate_audit_positions"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if got, err := s.CatchUp(ctx, dir, "gw"); err != nil || got != n {
				b.Fatalf("feed: %d, %v", got, err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	})
	b.Run(fmt.Sprintf("baseline-sqlite-index-%d", n), func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			xdir := b.TempDir() // a fresh index: its feed alone is timed
			for _, f := range mustGlob(b, dir+"/audit*") {
				if err := os.Link(f, xdir+"/"+filepath.Base(f)); err != nil {
					b.Fatal(err)
				}
			}
			x, err := auditindex.Open(xdir, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if got, err := x.CatchUp(); err != nil || got != n {
				b.Fatalf("feed: %d, %v", got, err)
			}
			b.StopTimer()
			x.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	})
}

func mustGlob(b *testing.B, pattern string) []string {
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		b.Fatalf("%s: %v %v", pattern, m, err)
	}
	return m
}
