package gateway

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestObserve(t *testing.T) {
	sink := &memSink{}
	g := newTestGateway(sink, &fakeTool{})
	for _, verdict := range []string{"", "allow", "deny"} {
		if _, err := g.Observe(&Observation{Agent: "a", Type: KindObserved, Verdict: verdict}); err == nil {
			t.Fatalf("verdict %q accepted: an observation must never pass for a decision", verdict)
		}
	}
	long := strings.Repeat("x", 4*MaxText)
	o := &Observation{ID: "obs-1", Agent: "a", Type: KindHook, Tool: strings.Repeat("T", 600<<10), Via: "hook",
		Verdict: "reported", Error: long, Detail: map[string]any{"content": long, "line": 3}}
	id, err := g.Observe(o)
	if err != nil || id != "obs-1" {
		t.Fatalf("Observe = %q, %v", id, err)
	}
	e := sink.entries[0]
	if e.Phase != PhaseResult || e.Decision != "reported" || e.Type != KindHook || e.Agent != "a" {
		t.Fatalf("observation recorded as %+v", e)
	}
	if len(e.Tool) > MaxField+32 || !strings.Contains(e.Tool, "…[cut ") {
		t.Fatalf("tool not bounded: %d bytes", len(e.Tool))
	}
	if c, _ := e.Detail["content"].(string); len(e.Error) > MaxText+32 || len(c) > MaxText+32 || e.Detail["line"] != 3 {
		t.Fatalf("error/detail not bounded: %d, %d bytes, line %v", len(e.Error), len(c), e.Detail["line"])
	}
	if o.Detail["content"] != long {
		t.Fatal("Observe changed the caller's Detail")
	}
	if s := g.Stats("a"); s.Calls.Load() != 0 || s.Denials.Load() != 0 {
		t.Fatal("an observation counted as a call")
	}
	sink.fail = errors.New("disk full")
	if _, err := g.Observe(&Observation{Agent: "a", Type: KindHook, Verdict: "reported"}); !errors.Is(err, ErrAuditUnavailable) {
		t.Fatalf("failing sink: %v", err)
	}
}

// Every entry goes through bounded: one from Handle with a huge unknown
// tool name, and BoundArgs applied to free text and structured details.
func TestEntriesAreBounded(t *testing.T) {
	sink := &memSink{}
	g := New(Options{Audit: sink, BoundArgs: func(raw json.RawMessage) json.RawMessage {
		var v any
		_ = json.Unmarshal(raw, &v)
		if s, ok := v.(string); ok {
			out, _ := json.Marshal(strings.ReplaceAll(s, "hunter2", "[REDACTED]"))
			return out
		}
		return json.RawMessage(`{"bounded":true}`)
	}}, newTestGateway(sink, &fakeTool{}).Snapshot())
	_, err := g.Handle(t.Context(), &Call{Agent: strings.Repeat("a", 1<<20), Tool: strings.Repeat("t", 1<<20)}, nil)
	if !errors.As(err, new(*DeniedError)) {
		t.Fatal(err)
	}
	if e := sink.entries[0]; len(e.Agent) > MaxField+32 || len(e.Tool) > MaxField+32 || len(e.Reason) > MaxText+32 {
		t.Fatalf("entry fields not bounded: agent %d, tool %d, reason %d bytes", len(e.Agent), len(e.Tool), len(e.Reason))
	}
	err = g.Refuse("a", &Call{Agent: "a", Detail: map[string]any{"peer": struct{ PID int }{7}, "note": "pw hunter2"}},
		Decision{Rule: "x", Reason: "token hunter2"})
	if !errors.As(err, new(*DeniedError)) {
		t.Fatal(err)
	}
	e := sink.entries[1]
	if e.Reason != "token [REDACTED]" || e.Detail["note"] != "pw [REDACTED]" || string(e.Detail["peer"].(json.RawMessage)) != `{"bounded":true}` {
		t.Fatalf("refusal not bounded through BoundArgs: %+v", e)
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abcd", "abcd"},
		{"abcdefgh", "abcd…[cut 4 bytes]"},
		{"abcé", "abc…[cut 2 bytes]"}, // é is two bytes: the cut falls before it
	} {
		if got := Cut(c.in, 4); got != c.want {
			t.Errorf("Cut(%q, 4) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Only the gateway writes audit entries (the audit package reads them and
// owns the chain): no other package builds one by hand, so bounding,
// redaction, stats and the chain cannot be bypassed.
func TestOnlyTheGatewayBuildsEntries(t *testing.T) {
	root, seen := filepath.Join("..", "..", ".."), 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == filepath.Join("internal", "host", "gateway") || rel == filepath.Join("internal", "host", "audit") || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		seen++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), "gateway.Entry{") {
			t.Errorf("%s builds an audit entry by hand; record through Gateway.Handle, Observe or Refuse", rel)
		}
		return nil
	})
	if err != nil || seen < 50 {
		t.Fatalf("walked %d files: %v", seen, err)
	}
}
