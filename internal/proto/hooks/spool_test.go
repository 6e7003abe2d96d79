package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func openSpool(t *testing.T) *Spool {
	t.Helper()
	s, err := OpenSpool(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func drainAll(t *testing.T, s *Spool) []Event {
	t.Helper()
	var got []Event
	if _, err := s.Drain(func(ev Event) error { got = append(got, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestSpoolOrderAndRemoval(t *testing.T) {
	s := openSpool(t)
	for _, id := range []string{"c3", "a1", "b2"} {
		if err := s.Put(Event{ID: id, Body: json.RawMessage(`{"id": "` + id + `", "html": "<&>"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	got := drainAll(t, s)
	if len(got) != 3 || got[0].ID != "c3" || got[1].ID != "a1" || got[2].ID != "b2" {
		t.Fatalf("order: %+v", got)
	}
	if string(got[0].Body) != `{"id":"c3","html":"<&>"}` {
		t.Fatalf("body changed: %s", got[0].Body)
	}
	if files := spoolFiles(t, s.Dir); len(files) != 0 {
		t.Fatalf("left behind: %v", files)
	}
	if len(drainAll(t, s)) != 0 {
		t.Fatal("delivered twice")
	}
}

// The same event put three times (three failed tap attempts) and drains that
// fail twice before the gateway is back: the receiver sees it exactly once
// when it deduplicates by id, and nothing is lost across the failures.
func TestSpoolThreeDeliveries(t *testing.T) {
	s := openSpool(t)
	ev := Event{ID: "0123abcd", Body: json.RawMessage(`{"hook_event_name":"PostToolUse"}`)}
	for range 3 {
		if err := s.Put(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(Event{ID: "later", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	down := errors.New("gateway unreachable")
	received := map[string]int{}
	attempts := 0
	deliver := func(ev Event) error {
		attempts++
		if attempts <= 2 {
			return down
		}
		received[ev.ID]++
		return nil
	}
	for i := range 2 {
		n, err := s.Drain(deliver)
		if !errors.Is(err, down) || n != 0 {
			t.Fatalf("drain %d while down: %d %v", i, n, err)
		}
	}
	if n, err := s.Drain(deliver); err != nil || n != 2 {
		t.Fatalf("drain after restart: %d %v", n, err)
	}
	if received["0123abcd"] != 1 || received["later"] != 1 || len(received) != 2 {
		t.Fatalf("received %v", received)
	}
}

func TestSpoolCorruptAndHalfWritten(t *testing.T) {
	s := openSpool(t)
	if err := s.Put(Event{ID: "good", Body: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(s.Dir, "ev-good.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(s.Dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ev-garbage.json", []byte("\x00\x01 not json"))
	write("ev-torn.json", good[:len(good)/2])                                            // a torn write
	write("ev-tampered.json", []byte(strings.Replace(string(good), `true`, `false`, 1))) // checksum fails
	write("ev-renamed.json", good)                                                       // name does not match id
	write("ev-empty.json", nil)
	write(".tmp-fresh-01", good[:10]) // a Put still writing: left alone
	write(".tmp-stale-02", good[:10]) // a Put that crashed: quarantined
	old := time.Now().Add(-2 * DefaultStaleTemp)
	if err := os.Chtimes(filepath.Join(s.Dir, ".tmp-stale-02"), old, old); err != nil {
		t.Fatal(err)
	}
	write("unrelated.txt", []byte("x"))

	got := drainAll(t, s)
	if len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("delivered %+v", got)
	}
	q, _ := os.ReadDir(filepath.Join(s.Dir, quarantine))
	var qn []string
	for _, e := range q {
		qn = append(qn, e.Name())
	}
	want := ".tmp-stale-02 ev-empty.json ev-garbage.json ev-renamed.json ev-tampered.json ev-torn.json"
	if strings.Join(qn, " ") != want {
		t.Fatalf("quarantine: %v", qn)
	}
	left := strings.Join(spoolFiles(t, s.Dir), " ")
	if left != ".tmp-fresh-01 unrelated.txt" {
		t.Fatalf("left in spool: %s", left)
	}
}

func TestSpoolPutRejects(t *testing.T) {
	s := openSpool(t)
	for _, ev := range []Event{
		{ID: "", Body: json.RawMessage(`{}`)},
		{ID: "../escape", Body: json.RawMessage(`{}`)},
		{ID: ".hidden", Body: json.RawMessage(`{}`)},
		{ID: strings.Repeat("a", 129), Body: json.RawMessage(`{}`)},
		{ID: "ok", Body: json.RawMessage(`{broken`)},
	} {
		if err := s.Put(ev); err == nil {
			t.Fatalf("accepted %q", ev.ID)
		}
	}
	if files := spoolFiles(t, s.Dir); len(files) != 0 {
		t.Fatalf("files written: %v", files)
	}
}

func BenchmarkSpoolPut(b *testing.B) {
	s, err := OpenSpool(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	body := json.RawMessage(readSample(b, "hook-input-PostToolUse-Bash.json"))
	i := 0
	for b.Loop() {
		i++
		if err := s.Put(Event{ID: "ev" + strconv.Itoa(i), Body: body}); err != nil {
			b.Fatal(err)
		}
	}
}

// An event the gateway refuses for good must not hold back the events
// spooled after it: it goes to quarantine and the queue moves on.
func TestSpoolRejectedDoesNotBlock(t *testing.T) {
	s := openSpool(t)
	for _, id := range []string{"poison", "later"} {
		if err := s.Put(Event{ID: id, Body: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	n, err := s.Drain(func(ev Event) error {
		if ev.ID == "poison" {
			return fmt.Errorf("gateway answered 400: %w", ErrRejected)
		}
		got = append(got, ev.ID)
		return nil
	})
	if err != nil || n != 1 || len(got) != 1 || got[0] != "later" {
		t.Fatalf("drain: %d %v, delivered %v", n, err, got)
	}
	if files := spoolFiles(t, s.Dir); len(files) != 0 {
		t.Fatalf("left in the queue: %v", files)
	}
	if q := spoolFiles(t, filepath.Join(s.Dir, quarantine)); len(q) != 1 || q[0] != "ev-poison.json" {
		t.Fatalf("quarantine: %v", q)
	}
}
