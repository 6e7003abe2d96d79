package audit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// CheckpointFile holds the latest signed checkpoint (its note), written
// once the log line carrying it is durable: what a receipt proves against
// and what a witness is sent.
const CheckpointFile = "checkpoint"

// How often a writer with a key signs a checkpoint unasked.
const (
	DefaultCheckpointEvery    = 1000
	DefaultCheckpointInterval = 30 * time.Second
)

// A checkpoint line is an entry of type checkpoint, decision signed, whose
// detail holds the signed note and, for queries, its size and root. It is
// a leaf itself: the checkpoint of size n is leaf n, and the next
// checkpoint covers it.
const (
	CheckpointTool   = "checkpoint"
	DetailCheckpoint = "note"
	DetailTreeSize   = "size"
	DetailTreeRoot   = "root"
)

// checkpoints is the writer's checkpoint state, owned by the committer.
type checkpoints struct {
	key note.Signer
	// handover are old keys that sign the next checkpoint beside key.
	handover []note.Signer
	// uncovered counts the lines after the last checkpoint line, which no
	// checkpoint covers yet; durableUncovered is it at the last durable line.
	uncovered, durableUncovered int64
	inBuf                       []byte // the checkpoint in buf, not yet durable
	latest                      []byte // the latest durable checkpoint
	stop                        chan struct{}
	ticking                     sync.WaitGroup
}

type rekey struct{ key, old note.Signer }

// put appends the entry just encoded in w.enc to the batch and the tree.
func (w *Writer) put(e *gateway.Entry) {
	w.last = e.Hash
	w.buf.Write(w.enc.Bytes())
	if w.tree != nil {
		h, _ := hexHash(e.Hash)
		w.tree.add(h)
	}
	if e.Type != gateway.KindCheckpoint {
		w.uncovered++
	}
}

func (w *Writer) every() int64 {
	if w.opts.CheckpointEvery > 0 {
		return int64(w.opts.CheckpointEvery)
	}
	return DefaultCheckpointEvery
}

// checkpointByCount signs a checkpoint when every() lines are uncovered.
func (w *Writer) checkpointByCount() {
	if w.key != nil && w.uncovered >= w.every() {
		w.addCheckpoint()
	}
}

// endFile ends the file about to be rotated with a checkpoint, and says
// whether it wrote one.
func (w *Writer) endFile() bool {
	if w.key == nil || w.uncovered == 0 {
		return false
	}
	return w.addCheckpoint() == nil
}

// requested answers a checkpoint request in the batch: a checkpoint line
// unless the latest one already covers every line before it (and no old
// key is waiting to hand over).
func (w *Writer) requested(r *request) error {
	if r.rekey != nil {
		w.key, w.handover = r.rekey.key, []note.Signer{r.rekey.old}
		return w.addCheckpoint()
	}
	if w.key == nil {
		return errors.New("audit: this log has no key: checkpoints are not signed")
	}
	if w.uncovered == 0 && len(w.handover) == 0 && (w.latest != nil || w.inBuf != nil) {
		return nil
	}
	return w.addCheckpoint()
}

// addCheckpoint signs the tree of every line so far and appends the
// checkpoint line to the batch.
func (w *Writer) addCheckpoint() error {
	e, msg, err := checkpointEntry(w.tree, append([]note.Signer{w.key}, w.handover...))
	if err != nil {
		w.log.Error("audit: signing a checkpoint failed", "err", err)
		return err
	}
	w.enc.Reset()
	if err := encodeLine(&w.enc, w.encoder, e, w.last); err != nil {
		return err
	}
	w.put(e)
	w.uncovered, w.inBuf = 0, msg
	return nil
}

// checkpointEntry is the checkpoint line of t's tree, signed by signers
// (the first names the log), and its signed note.
func checkpointEntry(t *tree, signers []note.Signer) (*gateway.Entry, []byte, error) {
	cp := proof.Checkpoint{Origin: signers[0].Name(), Size: t.n, Root: t.root()}
	msg, err := proof.SignCheckpoint(cp, signers...)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: signing a checkpoint: %w", err)
	}
	return &gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: gateway.PhaseResult, Type: gateway.KindCheckpoint,
		Tool: CheckpointTool, Decision: gateway.VerdictSigned,
		Detail: map[string]any{DetailTreeSize: cp.Size, DetailTreeRoot: cp.Root.String(), DetailCheckpoint: string(msg)}}, msg, nil
}

// rollbackCheckpoints forgets, with the lines of a failed write, their
// leaves and checkpoint.
func (w *Writer) rollbackCheckpoints() {
	if w.tree != nil {
		w.tree.rollback()
	}
	w.uncovered, w.inBuf = w.durableUncovered, nil
}

// durableCheckpoints follows a durable write: the tree file gets the new
// leaves, and a checkpoint in it becomes the latest.
func (w *Writer) durableCheckpoints() {
	if w.tree == nil {
		return
	}
	w.tree.markDurable()
	w.durableUncovered = w.uncovered
	if err := w.tree.write(); err != nil {
		if !w.tree.failing {
			w.log.Warn("audit: tree file not written; retrying at the next write (receipts wait for it)", "err", err)
		}
		w.tree.failing = true
	} else {
		w.tree.failing = false
	}
	if w.inBuf == nil {
		return
	}
	w.latest, w.inBuf, w.handover = w.inBuf, nil, nil
	if err := writeCheckpointFile(w.dir, w.latest); err != nil {
		w.log.Warn("audit: checkpoint file not written (the log has the checkpoint)", "err", err)
	}
}

func writeCheckpointFile(dir string, msg []byte) error {
	tmp := filepath.Join(dir, CheckpointFile+".tmp")
	if err := os.WriteFile(tmp, msg, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, CheckpointFile))
}

// LatestCheckpoint reads the latest checkpoint of the log in dir, as
// signed; fs.ErrNotExist before the first.
func LatestCheckpoint(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if len(b) > proof.MaxNote {
		return nil, fmt.Errorf("audit: %s: over %d bytes", CheckpointFile, proof.MaxNote)
	}
	return b, nil
}

// loadCheckpoint picks up from the latest checkpoint as the writer opens:
// how many lines it leaves uncovered, and whether it was signed by a key
// rotated out since (then the next checkpoint is signed by that key too).
func (w *Writer) loadCheckpoint() error {
	w.uncovered = w.tree.n
	defer func() { w.durableUncovered = w.uncovered }()
	msg, err := LatestCheckpoint(w.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	n, err := note.Open(msg, nil)
	var unverified *note.UnverifiedNoteError
	if !errors.As(err, &unverified) {
		w.log.Warn("audit: the checkpoint file is not a signed note; the next checkpoint replaces it", "err", err)
		return nil
	}
	n = unverified.Note
	cp, err := proof.ParseCheckpoint(n.Text)
	if err != nil {
		w.log.Warn("audit: the checkpoint file does not parse; the next checkpoint replaces it", "err", err)
		return nil
	}
	if cp.Size >= w.tree.n {
		w.log.Error("audit: the latest checkpoint covers more entries than the log holds: entries were lost, or the log was restored from an old copy. Run audit verify",
			"checkpointSize", cp.Size, "logEntries", w.tree.n)
		return nil
	}
	root, err := tlog.TreeHash(cp.Size, newFileHashes(w.tree.f))
	if err != nil || root != cp.Root {
		w.log.Error("audit: the latest checkpoint is not of this log's tree: the log was edited, or restored from an old copy. Run audit verify",
			"checkpointSize", cp.Size, "err", err)
		return nil
	}
	w.latest = msg
	w.uncovered = w.tree.n - cp.Size - 1 // the checkpoint's own line is leaf cp.Size
	if w.key == nil || signedBy(n, w.key) {
		return nil
	}
	for _, old := range w.opts.OldKeys {
		if signedBy(n, old) {
			w.handover = []note.Signer{old}
			w.log.Info("audit: the key was rotated; the next checkpoint is signed by the old key too", "old", fmt.Sprintf("%s+%08x", old.Name(), old.KeyHash()))
			return nil
		}
	}
	w.log.Warn("audit: the latest checkpoint is signed by a key this gateway does not hold; verifiers of the old key cannot follow on",
		"key", fmt.Sprintf("%s+%08x", w.key.Name(), w.key.KeyHash()))
	return nil
}

func signedBy(n *note.Note, s note.Signer) bool {
	for _, sig := range append(n.Sigs, n.UnverifiedSigs...) {
		if sig.Name == s.Name() && sig.Hash == s.KeyHash() {
			return true
		}
	}
	return false
}

// startCheckpoints, with a key, covers what a crash left uncovered and
// starts the interval's checkpoints.
func (w *Writer) startCheckpoints() error {
	if w.key == nil {
		return nil
	}
	if w.uncovered > 0 || len(w.handover) > 0 {
		if _, err := w.Checkpoint(); err != nil {
			return err
		}
	}
	every := w.opts.CheckpointInterval
	if every <= 0 {
		every = DefaultCheckpointInterval
	}
	w.stop = make(chan struct{})
	w.ticking.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				if _, err := w.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
					w.log.Warn("audit: interval checkpoint", "err", err)
				}
			}
		}
	})
	return nil
}

func (w *Writer) stopCheckpoints() {
	if w.stop != nil {
		close(w.stop)
		w.ticking.Wait()
	}
}

// closingCheckpoint covers the last lines as the writer closes.
func (w *Writer) closingCheckpoint() {
	if w.key == nil || w.uncovered == 0 {
		return
	}
	r := &request{checkpoint: true, done: make(chan error, 1)}
	w.commit([]*request{r})
	if err := <-r.done; err != nil {
		w.log.Warn("audit: no checkpoint at close; the next start signs one", "err", err)
	}
}

// Checkpoint returns a signed checkpoint that covers every entry appended
// before it: the latest, or a new one written into the log (durable when
// it returns).
func (w *Writer) Checkpoint() ([]byte, error) {
	r := &request{checkpoint: true, done: make(chan error, 1)}
	if err := w.wait(r); err != nil {
		return nil, err
	}
	return r.note, nil
}

// Rekey makes key the writer's key after a rotation from old: it writes a
// checkpoint signed by both at once, so a verifier holding the old key can
// follow the hand-over, and signs with key alone from then on.
func (w *Writer) Rekey(key, old note.Signer) ([]byte, error) {
	r := &request{checkpoint: true, rekey: &rekey{key, old}, done: make(chan error, 1)}
	if err := w.wait(r); err != nil {
		return nil, err
	}
	return r.note, nil
}

// fileHashes reads stored hashes from a tree file a page at a time, and
// keeps the pages it read: a receipt's proofs of nearby leaves share most
// of them, and a pread per hash would cost more than the proofs.
type fileHashes struct {
	f     *os.File
	pages map[int64][]byte
}

const hashesPerPage = 128

func newFileHashes(f *os.File) *fileHashes { return &fileHashes{f: f, pages: map[int64][]byte{}} }

func (h *fileHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		p := x / hashesPerPage
		page, ok := h.pages[p]
		if !ok {
			page = make([]byte, hashesPerPage*tlog.HashSize)
			n, err := h.f.ReadAt(page, p*hashesPerPage*tlog.HashSize)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("audit: tree file: %w", err)
			}
			page = page[:n]
			h.pages[p] = page
		}
		at := (x % hashesPerPage) * tlog.HashSize
		if at+tlog.HashSize > int64(len(page)) {
			return nil, fmt.Errorf("audit: tree file: no hash %d (the file is short of the log: run audit verify)", x)
		}
		copy(out[i][:], page[at:])
	}
	return out, nil
}

// TreeHashes opens the tree file of dir for reading proofs' hashes; close
// it when done. Hashes of leaves a checkpoint covers never change.
func TreeHashes(dir string) (tlog.HashReader, func() error, error) {
	f, err := os.Open(filepath.Join(dir, TreeFile))
	if err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	return newFileHashes(f), f.Close, nil
}
