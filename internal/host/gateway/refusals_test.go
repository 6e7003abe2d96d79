package gateway

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A flood of refusals from one source costs O(intervals) entries, and every
// refusal is still counted on the record; another source is not affected.
func TestRefusalsCoalescePerSource(t *testing.T) {
	const burst, every, flood = 5, 20 * time.Millisecond, 10000
	sink := &memSink{}
	g := New(Options{Audit: sink, RefusalBurst: burst, RefusalEvery: every}, newTestGateway(sink, &fakeTool{}).Snapshot())
	ids := map[string]int{} // answer id → refusals answered with it
	start := time.Now()
	for i := range flood {
		err := g.Refuse("10.0.0.1", &Call{Kind: KindAdmin, Via: "admin", Tool: "GET /v1/agents"}, Decision{Rule: "auth.token", Reason: "bad token"})
		var denied *DeniedError
		if !errors.As(err, &denied) || denied.ID == "" {
			t.Fatalf("refusal %d answered %v", i, err)
		}
		ids[denied.ID]++
		if i%(flood/burst) == 0 { // the other source refuses now and then, never past its burst
			if err := g.Refuse("a", &Call{Agent: "a", Kind: KindEgress, Via: "egress", Tool: "connect"}, Decision{Rule: "egress.limit", Reason: "busy"}); !errors.As(err, &denied) {
				t.Fatal(err)
			}
		}
	}
	intervals := int(time.Since(start)/every) + 2
	if err := g.Wait(t.Context()); err != nil { // writes the counts still open
		t.Fatal(err)
	}

	total, entries, coalesced := 0, 0, 0
	for _, e := range sink.entries {
		if e.Via == "egress" {
			if e.Rule != "egress.limit" {
				t.Fatalf("the quiet source's refusal was coalesced: %+v", e)
			}
			continue
		}
		entries++
		if e.Decision != "deny" {
			t.Fatalf("refusal recorded as %+v", e)
		}
		if e.Rule != RuleRefusalsCoalesced {
			total++
			continue
		}
		coalesced++
		n := e.Detail["count"].(int)
		if ids[e.ID] != n {
			t.Fatalf("coalesced entry %s counts %d, %d refusals were answered with its id", e.ID, n, ids[e.ID])
		}
		samples := e.Detail["samples"].([]RefusalSample)
		if e.Detail["source"] != "10.0.0.1" || len(samples) != 1 || samples[0].Reason != "bad token" || !strings.Contains(e.Reason, "10.0.0.1") {
			t.Fatalf("coalesced entry %+v", e)
		}
		total += n
	}
	if total != flood {
		t.Fatalf("the record counts %d refusals, %d were made", total, flood)
	}
	if entries > (burst+1)*intervals {
		t.Fatalf("%d entries for %d refusals over %d intervals, want at most %d", entries, flood, intervals, (burst+1)*intervals)
	}
	if s := g.Stats("a"); s.Denials.Load() != burst {
		t.Fatalf("quiet source: %d denials", s.Denials.Load())
	}
	t.Logf("%d refusals over %d intervals: %d entries (%d coalesced)", flood, intervals, entries, coalesced)
}

// A coalesced count is written when its interval ends, with nobody calling
// Wait, and counts against the agent's stats when it is counted.
func TestCoalescedRefusalsWrittenAtIntervalEnd(t *testing.T) {
	sink := &memSink{}
	g := New(Options{Audit: sink, RefusalBurst: 1, RefusalEvery: 200 * time.Millisecond}, newTestGateway(sink, &fakeTool{}).Snapshot())
	for range 3 {
		_ = g.Refuse("a", &Call{Agent: "a", Kind: KindTool, Via: "socket", Tool: "x"}, Decision{Rule: "args.invalid", Reason: "bad header"})
	}
	if s := g.Stats("a"); s.Calls.Load() != 3 || s.Denials.Load() != 3 {
		t.Fatalf("stats %d/%d, want 3/3", s.Calls.Load(), s.Denials.Load())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		sink.mu.Lock()
		n := len(sink.entries)
		sink.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries: the coalesced count was never written", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	e := sink.entries[1]
	if e.Rule != RuleRefusalsCoalesced || e.Detail["count"] != 2 || e.Agent != "a" || e.Type != KindTool || e.Via != "socket" {
		t.Fatalf("coalesced entry %+v", e)
	}
	// The interval is over: the next refusal is recorded on its own again.
	_ = g.Refuse("a", &Call{Agent: "a", Kind: KindTool, Via: "socket", Tool: "x"}, Decision{Rule: "args.invalid", Reason: "bad header"})
	if last := sink.entries[len(sink.entries)-1]; len(sink.entries) != 3 || last.Rule != "args.invalid" {
		t.Fatalf("after the interval: %+v", last)
	}
}
