package hookcall

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func collect(t *testing.T, data []byte) []Observation {
	t.Helper()
	var obs []Observation
	if err := ReadStreamJSON(bytes.NewReader(data), func(o Observation) error { obs = append(obs, o); return nil }); err != nil {
		t.Fatal(err)
	}
	return obs
}

func kinds(obs []Observation) string {
	var k []string
	for _, o := range obs {
		k = append(k, o.Kind+"="+o.Claimed)
	}
	return strings.Join(k, " ")
}

func TestStreamJSONSamples(t *testing.T) {
	t.Parallel()
	tests := []struct{ file, want string }{
		{"stream-json-allowed-run.jsonl", "tool_use= tool_result= permission_decision=accept"},
		{"stream-json-ask-headless.jsonl", "tool_use= permission_denied=deny tool_result= permission_decision=reject permission_denial=deny"},
		{"stream-json-defer.jsonl", "tool_use= tool_deferred=defer"},
		{"stream-json-deny-exit2.jsonl", "tool_use= tool_result= permission_decision=reject permission_denial=deny"},
		{"stream-json-deny-json.jsonl", "tool_use= tool_result= permission_decision=reject permission_denial=deny"},
		{"stream-json-dontask-silent-hook.jsonl", "tool_use= permission_denied=deny tool_result= permission_decision=reject permission_denial=deny"},
		{"stream-json-hook-timeout-failopen.jsonl", "tool_use= hook_no_verdict:PreToolUse=no_verdict tool_result= permission_decision=accept"},
		{"stream-json-include-hook-events.jsonl", "tool_use= tool_result= permission_decision=reject permission_denial=deny"},
		{"stream-json-pretooluse-continue-false.jsonl", "tool_use= tool_result= permission_decision=accept"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			obs := collect(t, readSample(t, tt.file))
			if got := kinds(obs); got != tt.want {
				t.Fatalf("\n got %s\nwant %s", got, tt.want)
			}
			seen := map[string]bool{}
			for _, o := range obs {
				if o.Tool != "Bash" || o.ToolUseID != "toolu_01FAKEGATETEST0000000001" || o.Session == "" || o.Line == 0 {
					t.Fatalf("observation incomplete: %+v", o)
				}
				if seen[o.ID] {
					t.Fatalf("duplicate id %s", o.ID)
				}
				seen[o.ID] = true
			}
			// Re-ingesting yields the same ids: idempotent.
			again := collect(t, readSample(t, tt.file))
			for i := range obs {
				if obs[i].ID != again[i].ID {
					t.Fatal("ids differ across ingestion")
				}
			}
		})
	}
}

func TestStreamJSONDetails(t *testing.T) {
	t.Parallel()
	obs := collect(t, readSample(t, "stream-json-deny-json.jsonl"))
	res, dec := obs[1], obs[2]
	if !res.IsError || res.Content != "PreToolUse:Bash hook error: GATE-DENY: json deny reason" {
		t.Fatalf("tool_result: %+v", res)
	}
	if dec.Source != "hook" || dec.Reason != "permission-rule" {
		t.Fatalf("decision: %+v", dec)
	}
	nv := collect(t, readSample(t, "stream-json-hook-timeout-failopen.jsonl"))[1]
	if !nv.TimedOut || nv.Source != "PreToolUse" || !strings.Contains(nv.Content, "didn't answer in time") {
		t.Fatalf("no verdict: %+v", nv)
	}
	pd := collect(t, readSample(t, "stream-json-dontask-silent-hook.jsonl"))[1]
	if pd.Reason != "mode" || !strings.HasPrefix(pd.Content, "Permission to use Bash has been denied") {
		t.Fatalf("permission_denied: %+v", pd)
	}
}

// Observations become entries that can never pass for decisions.
func TestObservationEntry(t *testing.T) {
	t.Parallel()
	for _, o := range collect(t, readSample(t, "stream-json-ask-headless.jsonl")) {
		e := o.Observed("demo")
		if e.Type != "observed" || e.Verdict != DecisionObserved || e.Verdict == "allow" || e.Verdict == "deny" {
			t.Fatalf("entry counts as a decision: %+v", e)
		}
		if e.ID != o.ID || e.Agent != "demo" || e.Tool != "Bash" || e.Session != o.Session || e.Detail["kind"] != o.Kind {
			t.Fatalf("entry: %+v", e)
		}
		if o.Claimed != "" && e.Detail["claimed"] != o.Claimed {
			t.Fatalf("claim lost: %+v", e.Detail)
		}
	}
	w := Observation{Kind: ObsToolUse, Tool: "Write", Input: []byte(`{"file_path":"/a","content":"12345"}`)}
	if got := string(w.Observed("a").Args); got != `{"content":{"bytes":5},"file_path":"/a"}` {
		t.Fatalf("body not counted: %s", got)
	}
}

func TestStreamJSONTolerance(t *testing.T) {
	t.Parallel()
	full := readSample(t, "stream-json-deny-json.jsonl")
	want := len(collect(t, full))

	// A run killed mid-line: the cut tail is ignored, everything before kept.
	cut := full[:len(full)-200]
	if n := len(collect(t, cut)); n != want-1 {
		t.Fatalf("truncated: %d observations, want %d", n, want-1)
	}
	// Unknown event types, odd shapes and blank lines are skipped.
	odd := []byte(`{"type":"stream_event","event":{}}` + "\n\n" + `{"type":"future_thing","x":1}` + "\n" +
		`{"type":"assistant","message":"not an object"}` + "\n" + `{"type":"user","message":{"content":"a plain prompt"}}` + "\n" +
		`[1,2]` + "\n" + `{"type":"system","subtype":"permission_denied","tool_use_id":{"x":1}}` + "\n")
	if n := len(collect(t, append(odd, full...))); n != want {
		t.Fatalf("with odd lines: %d, want %d", n, want)
	}
	// A broken line in the middle is corruption, not a crash: an error with its line.
	bad := append([]byte(`{"type":"assistant"`+"\n"), full...)
	err := ReadStreamJSON(bytes.NewReader(bad), func(Observation) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("mid-stream garbage: %v", err)
	}
	// fn's error stops the read.
	stop := errors.New("stop")
	if err := ReadStreamJSON(bytes.NewReader(full), func(Observation) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fn error: %v", err)
	}
	// Lines longer than bufio's buffer are read whole.
	big := fmt.Sprintf(`{"type":"user","session_id":"s","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"%s"}]}}`, strings.Repeat("y", 300<<10))
	obs := collect(t, []byte(big))
	if len(obs) != 1 || !strings.Contains(obs[0].Content, "…[truncated, 307200 bytes total]") {
		t.Fatalf("long line: %+v", obs)
	}
}

func FuzzReadStreamJSON(f *testing.F) {
	// Seeds are the samples' events one by one, not whole transcripts: each
	// new input the fuzzer finds is minimised, and minimising a 6 KB
	// transcript took the whole run (the fuzzer sat at a handful of execs).
	// The mutator joins lines back into streams by itself.
	for _, s := range []string{"stream-json-ask-headless.jsonl", "stream-json-hook-timeout-failopen.jsonl", "stream-json-defer.jsonl"} {
		for _, line := range bytes.SplitAfter(readSample(f, s), []byte("\n")) {
			if len(line) > 0 && len(line) < 1024 {
				f.Add(line)
			}
		}
	}
	f.Add([]byte(`{"type":"result","permission_denials":[{"tool_use_id":"x"}],"deferred_tool_use":{"id":"y"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = ReadStreamJSON(bytes.NewReader(data), func(o Observation) error {
			if o.ID == "" || o.Kind == "" || o.Line < 1 {
				t.Fatalf("bad observation %+v", o)
			}
			if e := o.Observed("a"); e.Verdict != DecisionObserved {
				t.Fatal("observation rendered as a decision")
			}
			return nil
		})
	})
}
