package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fill writes to path until the filesystem is full and returns the file.
func fill(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return f
		}
	}
}

// TestDiskFullRecovers: on a real full filesystem appends are refused; once
// space is freed the very next append succeeds (no restart), no refused
// entry is on disk, an enqueued result entry is not lost, and the chain
// verifies.
func TestDiskFullRecovers(t *testing.T) {
	for _, kind := range []string{testenv.FSTmpfs, testenv.FSExt4} {
		t.Run(kind, func(t *testing.T) {
			mnt := testenv.SmallFS(t, kind, 2<<20)
			dir := filepath.Join(mnt, "logs")
			w := open(t, dir, Options{})
			defer w.Close()
			var mu sync.Mutex
			accepted := map[string]bool{}
			refused := map[string]bool{}
			next := 0
			// appendMany appends n entries from 8 goroutines, so failures
			// hit batches of several entries, some cut short by the disk.
			appendMany := func(n int) {
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range n / 8 {
							e := entry(next + g*n + i)
							e.ID = fmt.Sprintf("%s-%d-%d-%d", kind, next, g, i)
							e.Args = json.RawMessage(`{"pad":"` + strings.Repeat("x", 700+i%7*97) + `"}`)
							err := w.Append(e)
							mu.Lock()
							if err == nil {
								accepted[e.ID] = true
							} else {
								refused[e.ID] = true
							}
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				next++
			}
			appendMany(64)
			filler := fill(t, filepath.Join(mnt, "filler"))
			// A result entry enqueued on the full disk is kept and written
			// once space returns: its call already ran.
			queued := entry(1)
			queued.ID, queued.Phase = kind+"-queued", gateway.PhaseResult
			w.Enqueue(queued)
			accepted[queued.ID] = true
			// Leave a few KB so some writes are cut short rather than refused whole.
			for _, free := range []int64{0, 3000, 9000} {
				fi, _ := filler.Stat()
				if err := filler.Truncate(fi.Size() - free); err != nil {
					t.Fatal(err)
				}
				appendMany(64)
			}
			if len(refused) == 0 {
				t.Fatal("no append was refused on a full disk")
			}
			// Space returns: the next append must go through.
			filler.Close()
			if err := os.Remove(filler.Name()); err != nil {
				t.Fatal(err)
			}
			e := entry(0)
			e.ID = kind + "-after"
			if err := w.Append(e); err != nil {
				t.Fatalf("append after space was freed: %v", err)
			}
			accepted[e.ID] = true
			refusedBefore := len(refused)
			appendMany(64)
			if len(refused) != refusedBefore {
				t.Fatalf("%d appends refused after space was freed", len(refused)-refusedBefore)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			onDisk := map[string]bool{}
			if err := Query(dir, Filter{}, func(e *gateway.Entry) error { onDisk[e.ID] = true; return nil }); err != nil {
				t.Fatal(err)
			}
			for id := range refused {
				if onDisk[id] {
					t.Errorf("refused entry %s is in the log", id)
				}
			}
			for id := range accepted {
				if !onDisk[id] {
					t.Errorf("accepted entry %s is missing from the log", id)
				}
			}
			verifyOK(t, dir, len(accepted))
			t.Logf("%s: %d accepted, %d refused", kind, len(accepted), len(refused))
		})
	}
}
