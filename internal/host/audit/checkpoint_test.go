package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const origin = "toolgate/gw-test"

// checkpointsOf are the log's checkpoint entries, in order.
func checkpointsOf(t testing.TB, dir string) []*gateway.Entry {
	t.Helper()
	var out []*gateway.Entry
	if err := Query(dir, Filter{Type: string(gateway.KindCheckpoint)}, func(e *gateway.Entry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func openCP(t testing.TB, e *gateway.Entry, keys ...note.Verifier) proof.Checkpoint {
	t.Helper()
	cp, _, err := proof.OpenCheckpoint([]byte(e.Detail[DetailCheckpoint].(string)), note.VerifierList(keys...))
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestCheckpointsWrittenAndVerified: a writer with a key signs a checkpoint
// every N entries, before each rotation (each rotated file ends with one)
// and at Close; each names the tree of the lines before it, consecutive
// ones are consistent, verify checks them all with the key, and the
// checkpoint file holds the last.
func TestCheckpointsWrittenAndVerified(t *testing.T) {
	dir := t.TempDir()
	key, vkey := testKey(t, origin)
	opts := Options{Key: key, CheckpointEvery: 10, MaxFileBytes: 8 << 10}
	write(t, dir, opts, 0, 95)
	cps := checkpointsOf(t, dir)
	if len(cps) < 10 {
		t.Fatalf("%d checkpoints for 95 entries, one every 10", len(cps))
	}
	rotated, _ := rotatedFiles(dir)
	if len(rotated) < 2 {
		t.Fatalf("%d rotations", len(rotated))
	}
	for _, f := range rotated {
		ls := lines(t, f)
		if !strings.Contains(ls[len(ls)-2], `"type":"checkpoint"`) {
			t.Errorf("%s does not end with a checkpoint", filepath.Base(f))
		}
	}
	ls := lines(t, filepath.Join(dir, CurrentFile))
	if !strings.Contains(ls[len(ls)-2], `"type":"checkpoint"`) {
		t.Error("Close wrote no last checkpoint")
	}
	hashes, closeTree, err := TreeHashes(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeTree()
	var prev proof.Checkpoint
	for _, e := range cps {
		cp := openCP(t, e, vkey)
		if e.Decision != gateway.VerdictSigned || e.Phase != gateway.PhaseResult || cp.Origin != origin {
			t.Fatalf("checkpoint entry: %+v", e)
		}
		if prev.Size > 0 {
			p, err := tlog.ProveTree(cp.Size, prev.Size, hashes)
			if err != nil || tlog.CheckTree(p, cp.Size, cp.Root, prev.Size, prev.Root) != nil {
				t.Fatalf("checkpoint of %d is not consistent with the one of %d: %v", cp.Size, prev.Size, err)
			}
		}
		prev = cp
	}
	latest, err := LatestCheckpoint(dir)
	if err != nil || string(latest) != cps[len(cps)-1].Detail[DetailCheckpoint] {
		t.Fatalf("checkpoint file: %q %v", latest, err)
	}
	rep, err := VerifyWith(dir, VerifyOptions{Keys: note.VerifierList(vkey)})
	if err != nil || !rep.OK() || rep.Checkpoints != len(cps) || rep.Entries != 95+len(cps) || rep.Covered != prev.Size {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	_, other := testKey(t, origin)
	rep, _ = VerifyWith(dir, VerifyOptions{Keys: note.VerifierList(other)})
	if rep.OK() || !strings.Contains(rep.Bad.Reason, "not signed by the given key; it is signed by "+origin) {
		t.Fatalf("another key: %v", rep.Bad)
	}
}

// TestCheckpointOnRequest: Checkpoint covers every entry before it, and
// writes nothing when the latest already does.
func TestCheckpointOnRequest(t *testing.T) {
	dir := t.TempDir()
	key, vkey := testKey(t, origin)
	w := open(t, dir, Options{Key: key})
	defer w.Close()
	for i := range 3 {
		if err := w.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := w.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	cp, _, err := proof.OpenCheckpoint(msg, note.VerifierList(vkey))
	if err != nil || cp.Size != 3 {
		t.Fatalf("checkpoint of %d entries, want 3: %v", cp.Size, err)
	}
	again, err := w.Checkpoint()
	if err != nil || string(again) != string(msg) || len(checkpointsOf(t, dir)) != 1 {
		t.Fatalf("a second request with nothing new wrote another checkpoint")
	}
	if _, err := open(t, t.TempDir(), Options{}).Checkpoint(); err == nil {
		t.Fatal("a writer without a key signed a checkpoint")
	}
}

// TestCheckpointAfterCrash: entries a crash left uncovered (written, no
// checkpoint after them) are covered by the checkpoint the next Open signs.
func TestCheckpointAfterCrash(t *testing.T) {
	dir := t.TempDir()
	key, vkey := testKey(t, origin)
	w := open(t, dir, Options{Key: key})
	for i := range 5 {
		if err := w.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	w.closeFiles() // a crash: no closing checkpoint
	w.stopCheckpoints()
	w = open(t, dir, Options{Key: key})
	defer w.Close()
	cps := checkpointsOf(t, dir)
	if len(cps) != 1 || openCP(t, cps[0], vkey).Size != 5 {
		t.Fatalf("after the crash: %d checkpoints", len(cps))
	}
}

// TestCheckpointInterval: an entry no count reaches is covered within the
// interval.
func TestCheckpointInterval(t *testing.T) {
	dir := t.TempDir()
	key, _ := testKey(t, origin)
	w := open(t, dir, Options{Key: key, CheckpointInterval: 20 * time.Millisecond})
	defer w.Close()
	if err := w.Append(entry(1)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(checkpointsOf(t, dir)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint within the interval")
		}
	}
	n := len(checkpointsOf(t, dir))
	time.Sleep(100 * time.Millisecond)
	if got := len(checkpointsOf(t, dir)); got != n {
		t.Fatalf("checkpoints went on with nothing to cover: %d then %d", n, got)
	}
}

// TestRotatedKeyHandsOver: after a rotation the next checkpoint is signed
// by the old key and the new, whether the gateway ran (Rekey) or not (the
// next Open), so a verifier holding the old key can take the new one on.
func TestRotatedKeyHandsOver(t *testing.T) {
	for _, running := range []bool{true, false} {
		dir := t.TempDir()
		old, vold := testKey(t, origin)
		key, vkey := testKey(t, origin)
		write(t, dir, Options{Key: old}, 0, 3)
		var w *Writer
		if running {
			w = open(t, dir, Options{Key: old})
			if _, err := w.Rekey(key, old); err != nil {
				t.Fatal(err)
			}
		} else {
			w = open(t, dir, Options{Key: key, OldKeys: []note.Signer{old}})
		}
		if err := w.Append(entry(9)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		cps := checkpointsOf(t, dir)
		if len(cps) != 3 {
			t.Fatalf("running=%v: %d checkpoints", running, len(cps))
		}
		openCP(t, cps[1], vold) // the hand-over, by both
		openCP(t, cps[1], vkey)
		last := []byte(cps[2].Detail[DetailCheckpoint].(string))
		if _, _, err := proof.OpenCheckpoint(last, note.VerifierList(vold)); err == nil {
			t.Fatalf("running=%v: the old key still signs after the hand-over", running)
		}
		rep, err := VerifyWith(dir, VerifyOptions{Keys: note.VerifierList(vold, vkey)})
		if err != nil || !rep.OK() {
			t.Fatalf("verify with both keys: %v %v", err, rep.Bad)
		}
	}
}

// TestVerifyCatchesRewrittenHistory: edits the chain alone cannot show —
// lines changed or dropped and every hash after recomputed, the tail cut
// and re-chained, the log restored from an old copy — are caught by the
// checkpoints in the log, or by a checkpoint kept elsewhere.
func TestVerifyCatchesRewrittenHistory(t *testing.T) {
	key, vkey := testKey(t, origin)
	setup := func(t *testing.T) (string, []string) {
		dir := t.TempDir()
		write(t, dir, Options{Key: key, CheckpointEvery: 5}, 0, 20)
		return dir, lines(t, filepath.Join(dir, CurrentFile))
	}
	save := func(t *testing.T, dir string, ls []string) {
		if err := os.WriteFile(filepath.Join(dir, CurrentFile), []byte(strings.Join(ls, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		last := strings.TrimSuffix(ls[len(ls)-2], "\n")
		os.WriteFile(filepath.Join(dir, HeadFile), []byte(lineHash([]byte(last))+"\n"), 0o600)
	}
	keys := VerifyOptions{Keys: note.VerifierList(vkey)}
	for _, tc := range []struct {
		name, reason string
		line         int
		edit         func([]string) []string
	}{
		{"change a line, re-chain", "root", 6, func(ls []string) []string {
			ls[2] = strings.Replace(ls[2], `"demo"`, `"demx"`, 1)
			rechain(ls, 2)
			return ls
		}},
		{"drop a line, re-chain", "size 5, but 4 entries precede it", 5, func(ls []string) []string {
			ls = append(ls[:2], ls[3:]...)
			rechain(ls, 2)
			return ls
		}},
		{"swap two lines, re-chain", "root", 6, func(ls []string) []string {
			ls[1], ls[2] = ls[2], ls[1]
			rechain(ls, 1)
			return ls
		}},
		{"edit a checkpoint's note, re-chain", "does not verify", 6, func(ls []string) []string {
			ls[5] = strings.Replace(ls[5], `\n5\n`, `\n6\n`, 1)
			rechain(ls, 5)
			return ls
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, ls := setup(t)
			save(t, dir, tc.edit(ls))
			if rep, err := Verify(dir); err != nil || rep.OK() {
				t.Fatalf("not caught without keys: %v", err)
			}
			rep, err := VerifyWith(dir, keys)
			if err != nil || rep.OK() || rep.Bad.Line != tc.line || !strings.Contains(rep.Bad.Reason, tc.reason) {
				t.Fatalf("got %v, want line %d: …%s…", rep.Bad, tc.line, tc.reason)
			}
		})
	}

	// Cut the tail and re-chain: the log alone looks whole (its last
	// checkpoint still holds), a checkpoint seen before the cut does not.
	dir, ls := setup(t)
	seenMsg, _ := LatestCheckpoint(dir)
	seen, _, _ := proof.OpenCheckpoint(seenMsg, note.VerifierList(vkey))
	save(t, dir, append(ls[:13], ""))
	os.Remove(filepath.Join(dir, CheckpointFile))
	if rep, _ := VerifyWith(dir, keys); !rep.OK() {
		t.Fatalf("a cut at a checkpoint: %v", rep.Bad)
	}
	rep, _ := VerifyWith(dir, VerifyOptions{Keys: keys.Keys, Seen: []Seen{{Checkpoint: seen, From: "receipt.json"}}})
	if rep.OK() || !strings.Contains(rep.Bad.Reason, "the checkpoint from receipt.json covers 23 entries, the log holds 13") {
		t.Fatalf("the cut tail against a checkpoint seen before: %v", rep.Bad)
	}

	// Restore an old copy and go on writing: a different history of the
	// same length as one seen.
	dir, ls = setup(t)
	old := t.TempDir()
	copyLog(t, old, ls[:13])
	write(t, old, Options{Key: key, CheckpointEvery: 5}, 50, 9)
	rep, _ = VerifyWith(dir, keys)
	if !rep.OK() {
		t.Fatal(rep.Bad)
	}
	rep, _ = VerifyWith(old, VerifyOptions{Keys: keys.Keys, Seen: []Seen{{Checkpoint: seen, From: "a witness"}}})
	if rep.OK() || !strings.Contains(rep.Bad.Reason, "are not the tree of the checkpoint from a witness") {
		t.Fatalf("a restored log written on: %v", rep.Bad)
	}
}

// copyLog writes ls as the log of to, with its head.
func copyLog(t *testing.T, to string, ls []string) {
	t.Helper()
	os.WriteFile(filepath.Join(to, CurrentFile), []byte(strings.Join(ls, "")), 0o600)
	last := strings.TrimSuffix(ls[len(ls)-1], "\n")
	os.WriteFile(filepath.Join(to, HeadFile), []byte(lineHash([]byte(last))+"\n"), 0o600)
}
