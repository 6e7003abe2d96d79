package audit

import (
	"fmt"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
)

// Receipt makes the receipt of the entries of the log in dir that sel
// selects, proved against checkpoint (signed by key, whose verifier key
// is vkey): each entry with its inclusion proof, and a manifest signed
// with key listing every leaf selected, so a receipt missing one fails.
// Entries the checkpoint does not cover yet are not in it; later counts
// them (a receipt of a live session wants a checkpoint signed now:
// Writer.Checkpoint). A session or a call is one agent's: without
// sel.Agent, the first entry of it names the agent, in the same pass.
func Receipt(dir string, checkpoint []byte, key note.Signer, vkey string, sel proof.Selection) (r *proof.Receipt, later int, err error) {
	infer := sel.Agent == "" && (sel.Session != "" || sel.Call != "")
	if !infer {
		if err := sel.Check(); err != nil {
			return nil, 0, err
		}
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, 0, fmt.Errorf("receipt: the gateway's key: %v", err)
	}
	cp, _, err := proof.OpenCheckpoint(checkpoint, note.VerifierList(v))
	if err != nil {
		return nil, 0, fmt.Errorf("receipt: %w", err)
	}
	var lines []proof.Line
	var index int64
	err = ScanLinesAfter(dir, Position{}, func(e *gateway.Entry, line []byte, _ Position) error {
		if infer && sel.Agent == "" && ((sel.Session != "" && e.Session == sel.Session) || (sel.Call != "" && e.ID == sel.Call)) {
			sel.Agent = e.Agent
		}
		switch {
		case !sel.Selects(line):
		case index < cp.Size:
			lines = append(lines, proof.Line{Index: index, Line: append([]byte(nil), line...)})
		default:
			later++
		}
		index++
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if infer && sel.Agent == "" {
		return nil, 0, fmt.Errorf("receipt: no entry of %s in the log", sel)
	}
	hashes, closeHashes, err := TreeHashes(dir)
	if err != nil {
		return nil, 0, err
	}
	defer closeHashes()
	r, err = proof.Build(checkpoint, key, vkey, sel, lines, hashes)
	return r, later, err
}
