package proof

import (
	"bytes"
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Line is a log line selected for a receipt, at its leaf index.
type Line struct {
	Index int64
	Line  []byte // as written, with or without its newline
}

// Build makes the receipt of lines (in leaf order) against a signed
// checkpoint of the gateway whose signer key is key and verifier key vkey,
// reading the proofs' hashes from hashes (the tree's stored hashes). It
// checks what it makes as a verifier would, so a tree file that disagrees
// with the log gives an error here, not a receipt that fails later.
func Build(checkpoint []byte, key note.Signer, vkey string, sel Selection, lines []Line, hashes tlog.HashReader) (*Receipt, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("receipt: the gateway's key: %v", err)
	}
	cp, _, err := OpenCheckpoint(checkpoint, note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	if err := sel.Check(); err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	r := &Receipt{Format: Format, Origin: cp.Origin, Key: vkey, Checkpoint: string(checkpoint), Selection: sel}
	m := &Manifest{Origin: cp.Origin, Tree: tlog.Tree{N: cp.Size, Hash: cp.Root}, Selection: sel}
	for i, l := range lines {
		line := bytes.TrimSuffix(l.Line, []byte("\n"))
		if l.Index >= cp.Size {
			return nil, fmt.Errorf("receipt: leaf %d is not covered by the checkpoint of %d entries", l.Index, cp.Size)
		}
		if i > 0 && l.Index <= lines[i-1].Index {
			return nil, fmt.Errorf("receipt: leaf %d out of order", l.Index)
		}
		h, err := LineHash(line)
		if err != nil {
			return nil, fmt.Errorf("receipt: leaf %d: %v", l.Index, err)
		}
		p, err := tlog.ProveRecord(cp.Size, l.Index, hashes)
		if err == nil {
			err = tlog.CheckRecord(p, cp.Size, cp.Root, l.Index, LeafHash(h))
		}
		if err != nil {
			return nil, fmt.Errorf("receipt: leaf %d: no proof against the checkpoint (the tree file disagrees with the log or the index: run audit verify): %v", l.Index, err)
		}
		r.Entries = append(r.Entries, Entry{Index: l.Index, Line: string(line), Proof: Hashes(p)})
		m.Leaves = append(m.Leaves, l.Index)
	}
	if len(r.Entries) == 0 {
		return nil, fmt.Errorf("receipt: no entries selected")
	}
	signed, err := m.Sign(key)
	if err != nil {
		return nil, fmt.Errorf("receipt: signing the manifest: %v", err)
	}
	r.Manifest = string(signed)
	return r, nil
}
