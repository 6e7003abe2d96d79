package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

func TestFindAndQuery(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{MaxFileBytes: 1500})
	for i := range 20 {
		e := entry(i)
		if i%4 == 0 {
			e.Decision, e.Agent = "deny", "other"
		}
		w.Append(e)
	}
	res := entry(5)
	res.Phase = gateway.PhaseResult
	w.Append(res)
	w.Close()

	got, err := Find(dir, "id005")
	if err != nil || len(got) != 2 || got[0].Phase != gateway.PhaseDecision || got[1].Phase != gateway.PhaseResult {
		t.Fatalf("Find: %v %+v", err, got)
	}
	for _, tc := range []struct {
		f    Filter
		want int
	}{
		{Filter{}, 21},
		{Filter{Decision: "deny"}, 5},
		{Filter{Agent: "demo", Decision: "allow"}, 16},
		{Filter{Type: "core_tool", Tool: "exec"}, 21},
		{Filter{Tool: "read"}, 0},
		{Filter{Since: time.Date(2026, 1, 1, 0, 0, 15, 0, time.UTC)}, 5},
	} {
		n := 0
		if err := Query(dir, tc.f, func(*gateway.Entry) error { n++; return nil }); err != nil || n != tc.want {
			t.Errorf("Query(%+v) = %d, %v; want %d", tc.f, n, err, tc.want)
		}
	}
	stop := errors.New("stop")
	if err := Query(dir, Filter{}, func(*gateway.Entry) error { return stop }); err != stop {
		t.Fatalf("Query did not pass fn's error on: %v", err)
	}
}

func TestTailLastN(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, Options{MaxFileBytes: 1500}, 0, 30)
	for _, tc := range []struct {
		n     int
		f     Filter
		first string
		count int
	}{
		{5, Filter{}, "id025", 5},
		{12, Filter{}, "id018", 12}, // reaches into rotated files
		{100, Filter{}, "id000", 30},
		{2, Filter{ID: "id003"}, "id003", 1},
		{0, Filter{}, "", 0},
	} {
		var ids []string
		err := Tail(context.Background(), dir, tc.f, tc.n, false, func(e *gateway.Entry) error { ids = append(ids, e.ID); return nil })
		if err != nil || len(ids) != tc.count || (tc.count > 0 && ids[0] != tc.first) {
			t.Errorf("Tail(n=%d, %+v) = %v, %v", tc.n, tc.f, ids, err)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Errorf("Tail(n=%d) out of order: %v", tc.n, ids)
			}
		}
	}
}

func TestTailFollowsAcrossRotation(t *testing.T) {
	defer func(d time.Duration) { pollInterval = d }(pollInterval)
	pollInterval = time.Millisecond
	dir := t.TempDir()
	opts := Options{MaxFileBytes: 1500}
	write(t, dir, opts, 0, 3)

	next, stop := follow(t, dir, Filter{Agent: "demo"}, 2)
	for _, want := range []string{"id001", "id002"} {
		if id := next(); id != want {
			t.Fatalf("got %s, want %s", id, want)
		}
	}
	w := open(t, dir, opts)
	defer w.Close()
	for i := 3; i < 30; i++ { // several rotations while following
		other := entry(i)
		other.Agent = "other"
		w.Append(other)
		w.Append(entry(i))
		if id := next(); id != entry(i).ID {
			t.Fatalf("got %s, want %s", id, entry(i).ID)
		}
	}
	if w.Stats().Rotations == 0 {
		t.Fatal("test did not rotate")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestTailFollowsTwoRotationsInOnePoll: when the writer rotates twice while
// Tail sleeps, the file in the middle is read too, in order.
func TestTailFollowsTwoRotationsInOnePoll(t *testing.T) {
	defer func(d time.Duration) { pollInterval = d }(pollInterval)
	pollInterval = 200 * time.Millisecond
	dir := t.TempDir()
	put := func(name string, ids ...int) { // written whole, then renamed into place
		var b strings.Builder
		for _, i := range ids {
			line, _ := json.Marshal(entry(i))
			b.Write(line)
			b.WriteByte('\n')
		}
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	rotate := func(i int) {
		name := rotatedPrefix + time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC).Format(rotatedLayout) + rotatedSuffix
		if err := os.Rename(filepath.Join(dir, CurrentFile), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	put(CurrentFile, 0, 1)

	next, stop := follow(t, dir, Filter{}, 2)
	defer stop() // before pollInterval is restored: Tail reads it

	for _, want := range []string{"id000", "id001"} {
		if id := next(); id != want {
			t.Fatalf("got %s, want %s", id, want)
		}
	}
	rotate(1)
	put(CurrentFile, 2, 3)
	rotate(2)
	put(CurrentFile, 4)
	for _, want := range []string{"id002", "id003", "id004"} {
		if id := next(); id != want {
			t.Fatalf("got %s, want %s", id, want)
		}
	}
}

// TestQueryWhileRotating: a query of a live, rotating log sees every entry
// written before it started, in order, with no file skipped.
func TestQueryWhileRotating(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{MaxFileBytes: 600}) // about two entries a file
	defer w.Close()
	whileRotating(t, w, func(written int) error {
		want := 0
		err := Query(dir, Filter{}, func(e *gateway.Entry) error {
			if e.ID != fmt.Sprint(want) {
				return fmt.Errorf("entry %s where %d was due: a file was skipped", e.ID, want)
			}
			want++
			return nil
		})
		if err == nil && want < written {
			err = fmt.Errorf("%d entries read, %d were written before the query", want, written)
		}
		return err
	})
}

// follow runs Tail with follow on dir until stop (or the test's end) and
// returns a function that gives the id of the next entry it delivers.
func follow(t *testing.T, dir string, f Filter, n int) (next func() string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	got := make(chan string, 100)
	done := make(chan error, 1)
	go func() {
		done <- Tail(ctx, dir, f, n, true, func(e *gateway.Entry) error { got <- e.ID; return nil })
	}()
	next = func() string {
		t.Helper()
		select {
		case id := <-got:
			return id
		case err := <-done:
			t.Fatalf("Tail ended: %v", err)
		case <-time.After(10 * time.Second): // a hang guard, not a speed assertion
			t.Fatal("Tail delivered nothing more")
		}
		return ""
	}
	stop = func() error {
		cancel()
		return <-done
	}
	return next, stop
}
