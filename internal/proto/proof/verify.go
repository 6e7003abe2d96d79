package proof

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Options are what a receipt is verified against, held by the verifier
// and not taken from the receipt.
type Options struct {
	// Keys are the gateway's verifier keys: one of them must sign the
	// checkpoint and the manifest.
	Keys []note.Verifier
	// Witnesses must each have cosigned the checkpoint too.
	Witnesses []note.Verifier
}

// Verified is a receipt that verified.
type Verified struct {
	Checkpoint Checkpoint
	Selection  Selection
	Entries    int
	SignedBy   string // the gateway key's name+keyhash that signed the checkpoint
	Witnesses  int    // witnesses that cosigned it
}

// InvalidError is a receipt that does not verify, with every reason found
// (at most maxProblems), each naming the entry it is about.
type InvalidError struct {
	Problems []string
	More     int // problems found beyond those listed
}

const maxProblems = 50

func (e *InvalidError) Error() string {
	s := "receipt invalid: " + strings.Join(e.Problems, "; ")
	if e.More > 0 {
		s += fmt.Sprintf("; and %d more", e.More)
	}
	return s
}

func (e *InvalidError) add(format string, args ...any) {
	if len(e.Problems) < maxProblems {
		e.Problems = append(e.Problems, fmt.Sprintf(format, args...))
		return
	}
	e.More++
}

// Verify checks a receipt against the gateway's keys: the checkpoint and
// the manifest are signed by one of them (and the checkpoint by every
// witness), they name the same tree, the manifest's selection is the
// receipt's and lists exactly the receipt's entries, and each entry's line
// hashes to the hash it ends with, is proven to be that leaf of the tree,
// and matches the selection. The error is an *InvalidError.
func Verify(data []byte, opts Options) (*Verified, error) {
	bad := &InvalidError{}
	r, err := Parse(data)
	if err != nil {
		bad.add("%v", err)
		return nil, bad
	}
	if len(opts.Keys) == 0 {
		return nil, errors.New("receipt: no key to verify it with: give the gateway's verifier key (toolgate id prints it)")
	}
	keys := note.VerifierList(opts.Keys...)
	cp, cpNote, err := OpenCheckpoint([]byte(r.Checkpoint), keys)
	if err != nil {
		var wrong *WrongKeyError
		if errors.As(err, &wrong) {
			bad.add("checkpoint: signed by %s, not by the key given (%s); the receipt says it is from %s",
				wrong.SignedBy, keyNames(opts.Keys), clip(r.Key))
		} else {
			bad.add("%v", err)
		}
		return nil, bad
	}
	v := &Verified{Checkpoint: cp, Selection: r.Selection, Entries: len(r.Entries), SignedBy: signers(&note.Note{Sigs: cpNote.Sigs})}
	if r.Origin != cp.Origin {
		bad.add("the receipt names origin %s, its checkpoint %s", clip(r.Origin), cp.Origin)
	}
	for _, w := range opts.Witnesses {
		if _, err := note.Open([]byte(r.Checkpoint), note.VerifierList(w)); err != nil {
			bad.add("checkpoint: not cosigned by witness %s+%08x: %v", w.Name(), w.KeyHash(), err)
			continue
		}
		v.Witnesses++
	}
	listed := verifyManifest(r, cp, keys, bad)
	if err := r.Selection.Check(); err != nil {
		bad.add("%v", err)
	}
	if listed != nil {
		missing(r.Entries, listed, bad)
	}
	verifyEntries(r.Entries, cp, r.Selection, bad)
	if len(bad.Problems) > 0 {
		return nil, bad
	}
	return v, nil
}

// verifyManifest checks the manifest against the checkpoint and the
// receipt's selection, and returns the leaves it lists (nil when it cannot
// be read).
func verifyManifest(r *Receipt, cp Checkpoint, keys note.Verifiers, bad *InvalidError) []int64 {
	n, err := openNote([]byte(r.Manifest), keys)
	if err != nil {
		bad.add("manifest: %v", err)
		return nil
	}
	m, err := ParseManifest(n.Text)
	if err != nil {
		bad.add("%v", err)
		return nil
	}
	if m.Origin != cp.Origin {
		bad.add("manifest: origin %s, the checkpoint's is %s", m.Origin, cp.Origin)
	}
	if m.Tree.N != cp.Size || m.Tree.Hash != cp.Root {
		bad.add("checkpoint and manifest disagree: the manifest is of the tree of %d entries (root %s), the checkpoint of %d (root %s)",
			m.Tree.N, m.Tree.Hash, cp.Size, cp.Root)
	}
	if m.Selection != r.Selection {
		got, _ := json.Marshal(r.Selection)
		want, _ := json.Marshal(m.Selection)
		bad.add("the receipt's selection %s is not the one the manifest signs, %s", got, want)
	}
	return m.Leaves
}

// missing names the leaves the manifest lists that the receipt lacks, and
// the receipt's entries the manifest does not list.
func missing(entries []Entry, listed []int64, bad *InvalidError) {
	have := make([]int64, len(entries))
	for i, e := range entries {
		have[i] = e.Index
	}
	for _, l := range listed {
		if _, found := slices.BinarySearch(have, l); !found {
			bad.add("leaf %d: listed by the manifest but not in the receipt: an entry was removed", l)
		}
	}
	for i, h := range have {
		if _, found := slices.BinarySearch(listed, h); !found {
			bad.add("entry %d (leaf %d): not listed by the manifest: an entry was added", i, h)
		}
	}
}

// verifyEntries checks the entries on every core, and adds their problems
// in order.
func verifyEntries(entries []Entry, cp Checkpoint, sel Selection, bad *InvalidError) {
	parts := min(runtime.GOMAXPROCS(0), 8, max(1, len(entries)/64))
	found := make([]InvalidError, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			for i := p * len(entries) / parts; i < (p+1)*len(entries)/parts; i++ {
				verifyEntry(i, &entries[i], cp, sel, &found[p])
			}
		})
	}
	wg.Wait()
	for _, f := range found {
		for _, p := range f.Problems {
			bad.add("%s", p)
		}
		bad.More += f.More
	}
}

func verifyEntry(i int, e *Entry, cp Checkpoint, sel Selection, bad *InvalidError) {
	line := []byte(e.Line)
	var f lineFields
	ferr := json.Unmarshal(line, &f)
	name := entryName(i, e.Index, f.ID)
	h, err := LineHash(line)
	if err != nil {
		bad.add("%s: %v", name(), err)
		return
	}
	if e.Index >= cp.Size {
		bad.add("%s: outside the checkpoint's tree of %d entries", name(), cp.Size)
		return
	}
	if err := tlog.CheckRecord(tlog.RecordProof(e.Proof), cp.Size, cp.Root, e.Index, LeafHash(h)); err != nil {
		bad.add("%s: its hash is right but its inclusion proof fails against the checkpoint (tree of %d): it is not leaf %d of that tree",
			name(), cp.Size, e.Index)
	}
	if ferr != nil {
		bad.add("%s: not an audit entry: %v", name(), ferr)
	} else if why := sel.mismatch(&f); why != "" {
		bad.add("%s: not of the selection: %s", name(), why)
	}
}

// entryName names entry i of a receipt in a problem, only when there is one.
func entryName(i int, leaf int64, id string) func() string {
	return func() string {
		if id == "" {
			return fmt.Sprintf("entry %d (leaf %d)", i, leaf)
		}
		return fmt.Sprintf("entry %d (leaf %d, call %s)", i, leaf, clip(id))
	}
}

func keyNames(keys []note.Verifier) string {
	var names []string
	for _, k := range keys {
		names = append(names, fmt.Sprintf("%s+%08x", k.Name(), k.KeyHash()))
	}
	return strings.Join(names, ", ")
}
