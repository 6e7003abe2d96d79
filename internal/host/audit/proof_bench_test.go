package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
)

// BenchmarkGoalCheckpointAppend64: the writer's throughput at 64
// concurrent callers keeping the tree and signing a checkpoint every
// DefaultCheckpointEvery entries; the goal is at most 5% below the
// baseline, the chain alone (no tree, no checkpoints). A warm-up run of
// the baseline goes first: whichever side ran first was the slower.
func BenchmarkGoalCheckpointAppend64(b *testing.B) {
	key, _ := testKey(b, origin)
	for _, mode := range []string{"warmup", "toolgate", "baseline"} {
		b.Run(mode, func(b *testing.B) {
			opts := Options{MaxFileBytes: 64 << 20, Key: key}
			if mode != "toolgate" {
				opts = Options{MaxFileBytes: 64 << 20, chainOnly: true}
			}
			benchAppendWith(b, 64, opts)
		})
	}
}

// BenchmarkGoalProofVerify: audit verify of a 1M-entry log in four files
// with its tree and a checkpoint every 1000 entries, signatures checked, in
// entries/s; the goal is 500k/s or more. The baseline checks the chain
// alone, as verify did before the tree.
func BenchmarkGoalProofVerify(b *testing.B) {
	const entries = 1_000_000
	dir := b.TempDir()
	key, vkey := testKey(b, origin)
	synthProofLog(b, dir, entries, entries/4, key)
	lines := entries + entries/DefaultCheckpointEvery
	for _, mode := range []string{"toolgate", "baseline"} {
		b.Run(mode, func(b *testing.B) {
			opts := VerifyOptions{Keys: note.VerifierList(vkey)}
			if mode == "baseline" {
				opts = VerifyOptions{chainOnly: true}
			}
			cpu0 := cpuTime(b)
			for b.Loop() {
				rep, err := VerifyWith(dir, opts)
				if err != nil || !rep.OK() || rep.Entries != lines || rep.TreeStale != "" ||
					mode == "toolgate" && rep.Checkpoints != entries/DefaultCheckpointEvery {
					b.Fatalf("verify: %v %+v", err, rep)
				}
			}
			b.ReportMetric(float64(lines*b.N)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(lines*b.N)/(cpuTime(b)-cpu0).Seconds(), "entries/cpu-s")
		})
	}
}

// sessionReceipt is a 200k-entry log with its tree, the lines of a
// 1,000-call session (2,000 entries, every 100th line: spread over the
// log, as a session's are among other agents'), its checkpoint and key.
type sessionReceipt struct {
	dir        string
	checkpoint []byte
	key        note.Signer
	vkey       note.Verifier
	vkeyText   string
	lines      []proof.Line
	sel        proof.Selection
}

func newSessionReceipt(b *testing.B) *sessionReceipt {
	const entries, every = 200_000, 100
	s := &sessionReceipt{dir: b.TempDir()}
	s.key, s.vkey, s.vkeyText = testKeyText(b, origin)
	synthProofLog(b, s.dir, entries, 0, s.key)
	w := open(b, s.dir, Options{Key: s.key})
	msg, err := w.Checkpoint()
	if err != nil {
		b.Fatal(err)
	}
	w.Close()
	s.checkpoint = msg
	leaf := int64(0)
	if err := forLines(filepath.Join(s.dir, CurrentFile), func(line []byte) error {
		if leaf%every == 0 && len(s.lines) < 2000 && !bytes.Contains(line, []byte(`"type":"checkpoint"`)) {
			s.lines = append(s.lines, proof.Line{Index: leaf, Line: bytes.Clone(line)})
		}
		leaf++
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	e := synthEntry(0)
	s.sel = proof.Selection{Agent: e.Agent, Session: e.Session}
	return s
}

func (s *sessionReceipt) build(b *testing.B) []byte {
	hashes, done, err := TreeHashes(s.dir)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	r, err := proof.Build(s.checkpoint, s.key, s.vkeyText, s.sel, s.lines, hashes)
	if err != nil {
		b.Fatal(err)
	}
	out, err := r.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkGoalReceipt: a receipt for a 1,000-call session (2,000 entries)
// of a 200k-entry log, in ms; the goal is 50 ms or less. The baseline
// writes the same lines out as JSON without proofs or manifest: what the
// receipt costs beyond exporting the entries. Both start from the lines,
// as the index gives them.
func BenchmarkGoalReceipt(b *testing.B) {
	s := newSessionReceipt(b)
	for _, mode := range []string{"toolgate", "baseline"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				if mode == "toolgate" {
					s.build(b)
					continue
				}
				var out []string
				for _, l := range s.lines {
					out = append(out, string(l.Line))
				}
				if _, err := json.Marshal(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGoalReceiptVerify: verifying that receipt, in ms; the goal is
// 20 ms or less. The baseline only parses it.
func BenchmarkGoalReceiptVerify(b *testing.B) {
	s := newSessionReceipt(b)
	data := s.build(b)
	os.WriteFile(filepath.Join(s.dir, "receipt.json"), data, 0o600)
	for _, mode := range []string{"toolgate", "baseline"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				if mode == "baseline" {
					if _, err := proof.Parse(data); err != nil {
						b.Fatal(err)
					}
					continue
				}
				v, err := proof.Verify(data, proof.Options{Keys: []note.Verifier{s.vkey}})
				if err != nil || v.Entries != 2000 {
					b.Fatalf("%v %+v", err, v)
				}
			}
			b.ReportMetric(float64(len(data))/(1<<20), "MiB")
		})
	}
}
