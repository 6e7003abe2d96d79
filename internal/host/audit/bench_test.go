package audit

import (
	"sync"
	"testing"
)

func benchAppend(b *testing.B, callers int) {
	benchAppendWith(b, callers, Options{MaxFileBytes: 64 << 20})
}

func benchAppendWith(b *testing.B, callers int, opts Options) {
	w := open(b, b.TempDir(), opts)
	defer w.Close()
	e := entry(1)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / callers
	for c := range callers {
		n := per
		if c == 0 {
			n += b.N % callers
		}
		wg.Go(func() {
			for range n {
				x := *e
				if err := w.Append(&x); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	st := w.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(st.Entries)/float64(st.Syncs), "entries/fsync")
}

func BenchmarkAppendSingle(b *testing.B)     { benchAppend(b, 1) }
func BenchmarkAppendParallel64(b *testing.B) { benchAppend(b, 64) }
