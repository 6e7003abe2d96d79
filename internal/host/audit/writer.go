package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"golang.org/x/mod/sumdb/note"
)

// File names inside the audit directory.
const (
	CurrentFile = "audit.jsonl"
	// HeadFile holds the hash of the last committed line. It lets Open and
	// Verify notice lines cut from the end of the log, which a hash chain alone
	// cannot show. It is a local check only: an attacker who can also rewrite
	// this file can hide a truncation; ship hashes off the box for more.
	HeadFile      = "audit.head"
	rotatedPrefix = "audit-"
	rotatedSuffix = ".jsonl"
	// Rotated names carry the UTC rotation time; fixed width, so they sort.
	rotatedLayout = "20060102T150405.000000000Z"
	maxBatch      = 1024
)

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("audit: writer closed")

// Options tune a Writer.
type Options struct {
	// MaxFileBytes rotates audit.jsonl before a line would take it past this
	// size; 0 never rotates.
	MaxFileBytes int64
	Logger       *slog.Logger
	// CloseInterrupted makes Open record an Interrupted result for every
	// call the log shows allowed and never finished, unless the last Close
	// was clean. The daemon sets it; readers of a live log must not.
	CloseInterrupted bool
	// AsyncHold is how long enqueued entries nobody waits for are held for
	// a commit somebody waits for; 0 takes DefaultAsyncHold.
	AsyncHold time.Duration
	// Key signs checkpoints, written into the log every CheckpointEvery
	// entries, CheckpointInterval after an entry no checkpoint covers, at
	// Close, before each rotation (a rotated file ends with one, a line
	// that may take it past MaxFileBytes) and on request (Checkpoint). Nil
	// writes none; the tree is kept either way.
	Key note.Signer
	// OldKeys are the keys rotated out before Key: when the last
	// checkpoint is signed by one of them, the next is signed by it too.
	OldKeys            []note.Signer
	CheckpointEvery    int           // 0: DefaultCheckpointEvery
	CheckpointInterval time.Duration // 0: DefaultCheckpointInterval
	// chainOnly keeps no tree: the benchmarks' baseline, the writer as it
	// was before it kept one.
	chainOnly bool
}

// DefaultAsyncHold holds a call's result entry (enqueued behind its answer)
// for the agent's next call, which usually comes within it: one fsync
// then makes both durable, and the next decision does not wait behind the
// result's own fsync. An entry held is durable at most this much later.
const DefaultAsyncHold = 5 * time.Millisecond

// Stats count a Writer's work; Entries/Syncs is the group-commit factor.
type Stats struct {
	Entries, Syncs, Rotations uint64
}

// Writer appends chained entries to DIR/audit.jsonl. Entries are written
// by a committer: an Append that finds nobody committing commits itself,
// in its own goroutine, with whatever else is queued; Appends that come
// meanwhile queue up, and the first of them commits them all as one batch
// with one fsync, in the order they are chained. Calls one at a time thus
// cost no hand-off between goroutines — a writer goroutine woken and then
// waking its caller cost a `toolgate exec` up to 0.4 ms on a 2-CPU machine.
type Writer struct {
	dir  string
	opts Options
	log  *slog.Logger

	qmu     sync.Mutex
	queue   []*request // waiting for a commit, in arrival order
	busy    bool       // a committer is at work (for good after Close)
	closed  bool
	idle    sync.Cond   // busy ended
	hold    *time.Timer // commits held entries nobody waits for
	holding bool        // hold is armed
	// committing, when set (tests), runs as a committer takes its batch.
	committing func()

	// owned by the committer
	f       *os.File
	head    *os.File
	size    int64  // bytes of audit.jsonl that are durable
	last    string // hash of the last line chained (in buf or on disk)
	durable string // hash of the last durable line: the chain resumes here after a failure
	lastRot time.Time
	// broken: a write failed and the file's tail is not yet cut back to
	// size (or the file is not open); repaired before the next write.
	broken    bool
	headStale bool                // the head file missed an update; rewritten at the next flush
	retry     []*request          // enqueued entries whose write failed, tried again first
	lost      error               // enqueued entries given up on, reported by Close
	open      map[string]struct{} // ids of calls allowed and not yet finished, for the clean mark
	wasClean  bool                // the log was closed clean when opened
	openKnown bool                // open holds every unfinished call: the log was clean, or Open closed the rest
	buf, enc  bytes.Buffer
	encoder   *json.Encoder

	pos                       atomic.Pointer[Position]
	entries, syncs, rotations atomic.Uint64

	// the tree and the checkpoints (checkpoint.go), owned by the committer
	tree *tree
	checkpoints
}

type request struct {
	e     *gateway.Entry
	done  chan error
	async bool // enqueued: nobody waits for done
	// checkpoint (with no entry) asks for a checkpoint covering every entry
	// before it, answered in note; rekey first makes rekey.key the key.
	checkpoint bool
	rekey      *rekey
	note       []byte
}

// errCommit, sent on a waiting request's done, makes its caller the
// committer: the one before it finished its batch and others still wait.
var errCommit = errors.New("audit: commit the queue")

var _ gateway.AuditSink = (*Writer)(nil)

// Open opens (or creates) the audit log in dir, repairs a torn last line
// left by a crash, and resumes the chain.
func Open(dir string, opts Options) (*Writer, error) {
	w := &Writer{dir: dir, opts: opts, log: opts.Logger, open: map[string]struct{}{}}
	w.key = opts.Key
	w.idle.L = &w.qmu
	if w.log == nil {
		w.log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := w.resume(); err != nil {
		w.closeFiles()
		return nil, err
	}
	w.encoder = json.NewEncoder(&w.enc)
	w.encoder.SetEscapeHTML(false)
	w.hold = time.AfterFunc(w.holdFor(), w.holdOver)
	w.hold.Stop()
	w.openKnown = w.wasClean
	if opts.CloseInterrupted && !w.wasClean {
		// Not fatal: a call the log cannot take now is refused on its own.
		err := w.closeInterrupted()
		if err != nil {
			w.log.Error("audit: interrupted calls not all recorded", "err", err)
		}
		w.openKnown = err == nil
	}
	if err := w.startCheckpoints(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (w *Writer) resume() error {
	var err error
	if w.f, err = w.openCurrent(); err != nil {
		return err
	}
	if w.size, w.last, err = repairTail(w.f, w.log); err != nil {
		return err
	}
	rotated, err := rotatedFiles(w.dir)
	if err != nil {
		return err
	}
	w.setPosition(w.size, w.last)
	if len(rotated) > 0 {
		newest := rotated[len(rotated)-1]
		w.lastRot = rotationTime(newest)
		if w.size == 0 { // crashed or rotated just before: chain on from the last file
			if w.last, err = lastHashOf(newest); err != nil {
				return err
			}
			fi, err := os.Stat(newest)
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			w.setPosition(fi.Size(), w.last)
		}
	}
	if !w.opts.chainOnly {
		if err := w.syncTree(w.last); err != nil {
			return err
		}
		if err := w.loadCheckpoint(); err != nil {
			return err
		}
	}
	if w.head, err = os.OpenFile(filepath.Join(w.dir, HeadFile), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	w.durable = w.last
	head := readHead(w.head)
	clean, err := readClean(w.head)
	if err != nil {
		return err
	}
	w.wasClean = clean && head == w.last
	if head == "" || head == w.last {
		return w.writeHead()
	}
	// The head lags the log after a crash (it is written after the fsync and
	// not synced itself); then it is somewhere in the chain. If it is nowhere,
	// lines were cut from the end: chain on from the head so the gap stays
	// visible to Verify at the next line.
	found, err := chainHas(w.dir, head)
	if err != nil {
		return err
	}
	if !found {
		w.log.Error("audit log truncated: last committed entry is missing; the next line will show the gap",
			"dir", w.dir, "head", head, "lastOnDisk", w.last)
		w.last, w.durable = head, head
		return nil
	}
	return w.writeHead()
}

func (w *Writer) openCurrent() (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(w.dir, CurrentFile), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Append chains e, writes it and returns once it is fsync'ed. It sets e.Prev
// and e.Hash. An error means the entry is not recorded.
func (w *Writer) Append(e *gateway.Entry) error {
	return w.wait(&request{e: e, done: make(chan error, 1)})
}

// Enqueue chains and writes e like Append but returns at once: the entry is
// durable moments later, ordered before anything appended after it. When its
// write fails it is kept and written first at the next commit (up to
// maxBatch entries; more are logged and reported by Close). The gateway
// enqueues result entries, whose call's decision was durable before it ran.
func (w *Writer) Enqueue(e *gateway.Entry) {
	if w.submit(&request{e: e, done: make(chan error, 1), async: true}) != nil {
		w.log.Error("audit: entry enqueued after close, not recorded", "id", e.ID)
	}
}

// Flush returns once everything enqueued before it is durable (or failed).
func (w *Writer) Flush() error {
	return w.wait(&request{done: make(chan error, 1)}) // no entry: a barrier
}

// wait submits r and returns its outcome, committing when it is r's turn.
func (w *Writer) wait(r *request) error {
	if err := w.submit(r); err != nil {
		return err
	}
	for {
		err := <-r.done
		if err != errCommit {
			return err
		}
		w.commitQueued()
	}
}

// submit queues r and, when nobody is committing, commits: at once for an
// entry somebody waits for; for one nobody waits for, once the hold is
// over (or maxBatch of them wait), so that it rides with the next append.
func (w *Writer) submit(r *request) error {
	w.qmu.Lock()
	if w.closed {
		w.qmu.Unlock()
		return ErrClosed
	}
	w.queue = append(w.queue, r)
	if w.busy || r.async && len(w.queue) < maxBatch {
		if !w.busy {
			w.armHold()
		}
		w.qmu.Unlock()
		return nil
	}
	w.busy = true
	w.qmu.Unlock()
	w.commitQueued()
	return nil
}

// commitQueued commits one batch from the front of the queue; the caller is
// the committer. Then the first caller still waiting commits the next (one
// fsync for all that came meanwhile), or nobody is committing.
func (w *Writer) commitQueued() {
	w.qmu.Lock()
	n := min(len(w.queue), maxBatch)
	batch := slices.Clone(w.queue[:n])
	w.queue = slices.Delete(w.queue, 0, n)
	if w.holding { // the held entries go now
		w.hold.Stop()
		w.holding = false
	}
	w.qmu.Unlock()
	if w.committing != nil {
		w.committing()
	}
	w.commit(batch)
	w.qmu.Lock()
	defer w.qmu.Unlock()
	for _, r := range w.queue {
		if !r.async {
			r.done <- errCommit
			return
		}
	}
	w.busy = false
	if len(w.queue) > 0 {
		w.armHold()
	}
	w.idle.Broadcast()
}

// armHold starts the hold for queued entries nobody waits for; w.qmu is held.
func (w *Writer) armHold() {
	if !w.holding {
		w.holding = true
		w.hold.Reset(w.holdFor())
	}
}

func (w *Writer) holdFor() time.Duration {
	if w.opts.AsyncHold > 0 {
		return w.opts.AsyncHold
	}
	return DefaultAsyncHold
}

// holdOver commits the held entries when nobody appended within the hold.
func (w *Writer) holdOver() {
	w.qmu.Lock()
	w.holding = false
	if w.busy || len(w.queue) == 0 {
		w.qmu.Unlock()
		return
	}
	w.busy = true
	w.qmu.Unlock()
	w.commitQueued()
}

// Close waits for queued entries to be written and closes the files. It
// reports enqueued entries that could not be written, so they are not lost
// quietly.
func (w *Writer) Close() error {
	w.qmu.Lock()
	if w.closed {
		w.qmu.Unlock()
		return nil
	}
	w.closed = true
	w.stopCheckpoints()
	for w.busy {
		w.idle.Wait()
	}
	w.busy = true // for good: nothing commits after Close
	w.hold.Stop()
	queued := w.queue
	w.queue = nil
	w.qmu.Unlock()
	for len(queued) > 0 {
		n := min(len(queued), maxBatch)
		w.commit(queued[:n])
		queued = queued[n:]
	}
	if len(w.retry) > 0 { // a last try for enqueued entries that failed
		w.commit(nil)
	}
	w.closingCheckpoint()
	for _, r := range w.retry {
		w.lose(r, errors.New("audit: log still failing at close"))
	}
	return errors.Join(w.lost, w.markClean(), w.closeFiles())
}

// Stats returns the counters since Open.
func (w *Writer) Stats() Stats {
	return Stats{Entries: w.entries.Load(), Syncs: w.syncs.Load(), Rotations: w.rotations.Load()}
}

func (w *Writer) closeFiles() error {
	var errs []error
	for _, f := range []*os.File{w.f, w.head} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(append(errs, w.tree.close())...)
}

// commit writes one batch: one write and one fsync, plus one more of each
// when the batch crosses a rotation. Entries enqueued earlier whose write
// failed go first. A failure refuses the rest of the batch and leaves the
// file as it was before the batch, so the next commit starts clean.
func (w *Writer) commit(batch []*request) {
	if len(w.retry) > 0 {
		batch = append(w.retry, batch...)
		w.retry = nil
	}
	if err := w.repair(); err != nil {
		w.abort(batch, err)
		return
	}
	var pending []*request // in buf, or barriers, answered by the next flush
	reply := func(err error) {
		for _, r := range pending {
			if err == nil && r.e != nil {
				w.track(r.e)
			}
			if err == nil && r.checkpoint {
				r.note = w.latest
			}
			r.done <- err
		}
		pending = pending[:0]
	}
	for i, r := range batch {
		if r.e == nil { // a Flush barrier or a checkpoint: answered with this batch's fsync
			if r.checkpoint {
				if err := w.requested(r); err != nil {
					r.done <- err
					continue
				}
			}
			pending = append(pending, r)
			continue
		}
		w.enc.Reset()
		if err := encodeLine(&w.enc, w.encoder, r.e, w.last); err != nil {
			w.log.Error("audit: entry not encodable, not recorded", "id", r.e.ID, "err", err)
			r.done <- err
			continue
		}
		if w.opts.MaxFileBytes > 0 && w.size+int64(w.buf.Len()) > 0 &&
			w.size+int64(w.buf.Len()+w.enc.Len()) > w.opts.MaxFileBytes {
			if w.endFile() { // the entry now follows the file's checkpoint
				w.enc.Reset()
				_ = encodeLine(&w.enc, w.encoder, r.e, w.last) // it encoded just before
			}
			if err := w.flush(); err != nil {
				w.abort(append(pending, batch[i:]...), err)
				return
			}
			reply(nil)
			if err := w.rotate(); err != nil {
				w.abort(batch[i:], err)
				return
			}
		}
		w.put(r.e)
		pending = append(pending, r)
		w.checkpointByCount()
	}
	if err := w.flush(); err != nil {
		w.abort(pending, err)
		return
	}
	reply(nil)
}

// abort answers reqs after a failed write: their entries are not recorded
// (a waiting caller refuses its call; an enqueued entry is kept for the next
// commit), the chain goes back to the last durable line, and the file's
// tail is cut back to it.
func (w *Writer) abort(reqs []*request, cause error) {
	err := fmt.Errorf("audit: log write failed: %w", cause)
	w.log.Error("audit log write failed; calls are refused until a write succeeds", "dir", w.dir, "err", cause)
	w.buf.Reset()
	w.last = w.durable
	w.rollbackCheckpoints()
	w.broken = true
	if rerr := w.repair(); rerr != nil {
		w.log.Error("audit: cutting the failed write off the log failed; trying again at the next entry", "err", rerr)
	}
	for _, r := range reqs {
		switch {
		case !r.async:
			r.done <- err
		case len(w.retry) < maxBatch:
			w.retry = append(w.retry, r)
		default:
			w.lose(r, err)
		}
	}
}

func (w *Writer) lose(r *request, err error) {
	w.log.Error("audit: enqueued entry not recorded", "id", r.e.ID, "err", err)
	w.lost = errors.Join(w.lost, fmt.Errorf("entry %s not recorded: %w", r.e.ID, err))
}

// repair brings a broken log back to its last durable line: a failed write
// may have left a torn line, or whole lines that never reached the disk
// durably; either would be chained over by the next write. When rotation
// failed half-way there is no open file: reopen audit.jsonl and cut any
// torn tail.
func (w *Writer) repair() error {
	if !w.broken {
		return nil
	}
	if w.f == nil {
		f, err := w.openCurrent()
		if err != nil {
			return err
		}
		size, _, err := repairTail(f, w.log)
		if err != nil {
			f.Close()
			return err
		}
		w.f, w.size = f, size
	} else {
		if err := w.f.Truncate(w.size); err != nil {
			return fmt.Errorf("audit: repair: %w", err)
		}
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("audit: repair: %w", err)
		}
	}
	w.broken = false
	return nil
}

func (w *Writer) flush() error {
	if w.buf.Len() == 0 {
		return nil
	}
	n, err := w.f.Write(w.buf.Bytes())
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		return err
	}
	w.size += int64(n)
	w.durable = w.last
	w.setPosition(w.size, w.durable)
	w.entries.Add(uint64(bytes.Count(w.buf.Bytes(), []byte{'\n'})))
	w.syncs.Add(1)
	w.buf.Reset()
	// After the fsync, so the head never names a line that is not durable.
	// The lines are durable whether or not the head follows: a head that
	// lags is what a crash leaves too, and Open handles it.
	if err := w.writeHead(); err != nil {
		if !w.headStale {
			w.log.Warn("audit: head not updated; retrying at the next write", "err", err)
		}
		w.headStale = true
	} else {
		w.headStale = false
	}
	w.durableCheckpoints() // after the head: the tree's hashes, then the checkpoint file
	return nil
}

func (w *Writer) writeHead() error {
	if _, err := w.head.WriteAt([]byte(fmt.Sprintf("%-*s\n", hashHexLen, w.last)), 0); err != nil {
		return fmt.Errorf("audit: head: %w", err)
	}
	return nil
}

func readHead(f *os.File) string {
	var b [hashHexLen + 1]byte
	if n, _ := f.ReadAt(b[:], 0); n == len(b) && b[hashHexLen] == '\n' {
		return strings.TrimSpace(string(b[:hashHexLen]))
	}
	return ""
}

// rotate renames the full file to audit-<UTC time>.jsonl and starts a new one;
// the chain carries on through w.last.
func (w *Writer) rotate() error {
	t := time.Now().UTC()
	if !t.After(w.lastRot) { // names must sort in order even if the clock steps back
		t = w.lastRot.Add(time.Nanosecond)
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return err
	}
	name := filepath.Join(w.dir, rotatedPrefix+t.Format(rotatedLayout)+rotatedSuffix)
	if err := os.Rename(filepath.Join(w.dir, CurrentFile), name); err != nil {
		return err
	}
	f, err := w.openCurrent()
	if err != nil {
		return err
	}
	w.f, w.size, w.lastRot = f, 0, t
	w.rotations.Add(1)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("audit: sync dir: %w", err)
	}
	return nil
}

// rotatedFiles lists the rotated files of dir, oldest first.
func rotatedFiles(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var out []string
	for _, de := range des {
		if n := de.Name(); de.Type().IsRegular() && !rotationTime(n).IsZero() {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Strings(out)
	return out, nil
}

// rotationTime parses a rotated file's name; zero for any other name.
func rotationTime(path string) time.Time {
	n := filepath.Base(path)
	if !strings.HasPrefix(n, rotatedPrefix) || !strings.HasSuffix(n, rotatedSuffix) {
		return time.Time{}
	}
	t, _ := time.Parse(rotatedLayout, n[len(rotatedPrefix):len(n)-len(rotatedSuffix)])
	return t
}

// allFiles lists the log in chain order: rotated files, then audit.jsonl.
func allFiles(dir string) ([]string, error) {
	files, err := rotatedFiles(dir)
	if err != nil {
		return nil, err
	}
	return append(files, filepath.Join(dir, CurrentFile)), nil
}

// repairTail cuts a torn end off f: bytes after the last newline, and then
// any last lines that are not valid entries (a crash can leave a line of
// zeros). It returns the good size and the last good line's hash.
func repairTail(f *os.File, log *slog.Logger) (int64, string, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, "", fmt.Errorf("audit: %w", err)
	}
	size, end := fi.Size(), fi.Size()
	var hash string
	for end > 0 {
		start, line, err := lastLine(f, end)
		if err != nil {
			return 0, "", err
		}
		if complete := line[len(line)-1] == '\n'; complete {
			if _, perr := parseLine(line[:len(line)-1]); perr == nil {
				hash = lineHash(line[:len(line)-1])
				break
			}
		}
		end = start
	}
	if end < size {
		log.Warn("audit: cut a torn or invalid end of the log", "file", f.Name(), "bytes", size-end, "keptBytes", end)
		if err := f.Truncate(end); err != nil {
			return 0, "", fmt.Errorf("audit: repair: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, "", fmt.Errorf("audit: repair: %w", err)
		}
	}
	return end, hash, nil
}

// lastLine returns the line ending at end (with its newline, if it has one)
// and its start offset.
func lastLine(r io.ReaderAt, end int64) (int64, []byte, error) { return newBackward(r, end).prev() }

// lastHashOf returns the hash of a closed file's last line.
func lastHashOf(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return "", err
	}
	_, line, err := lastLine(f, fi.Size())
	if err != nil {
		return "", err
	}
	if _, err := parseLine(bytes.TrimSuffix(line, []byte{'\n'})); err != nil {
		return "", fmt.Errorf("audit: last line of %s: %v (run audit verify)", path, err)
	}
	return lineHash(bytes.TrimSuffix(line, []byte{'\n'})), nil
}

// chainHas reports whether any line of the log has the given hash.
func chainHas(dir, hash string) (bool, error) {
	files, err := allFiles(dir)
	if err != nil {
		return false, err
	}
	want := []byte(hashKey + hash + "\"}\n")
	for i := len(files) - 1; i >= 0; i-- {
		data, err := os.ReadFile(files[i])
		if err != nil {
			return false, fmt.Errorf("audit: %w", err)
		}
		if bytes.Contains(data, want) {
			return true, nil
		}
	}
	return false, nil
}
