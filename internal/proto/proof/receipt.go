package proof

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"
)

// Format is the receipt's format version, its "format" field.
const Format = "toolgate-receipt/v1"

// Bounds of a receipt this package reads.
const (
	MaxReceipt = 256 << 20 // bytes of the file
	MaxEntries = 1_000_000
	MaxLine    = 16 << 20 // bytes of one log line
	maxProof   = 64       // hashes of one inclusion proof: a tree of 2^63 needs 63
)

// Receipt is a self-contained proof that some entries are in a gateway's
// log: each entry as its exact log line, its leaf index and its inclusion
// proof in the tree a signed checkpoint names, and a signed manifest that
// lists every entry selected. Other agents' entries appear in it only as
// hashes: the proofs' siblings and the lines' prev.
type Receipt struct {
	Format string `json:"format"`
	Origin string `json:"origin"`
	// Key is the gateway's verifier key as the gateway states it; a
	// verifier checks against a key it holds, never against this one.
	Key        string    `json:"key"`
	Checkpoint string    `json:"checkpoint"` // signed note (Checkpoint)
	Manifest   string    `json:"manifest"`   // signed note (Manifest)
	Selection  Selection `json:"selection"`
	Entries    []Entry   `json:"entries"`
}

// Entry is one selected log line, proven.
type Entry struct {
	Index int64  `json:"index"` // leaf index: the line's place in the chain, from 0
	Line  string `json:"line"`  // the log line as written, without its newline
	Proof Hashes `json:"proof"` // tlog.ProveRecord(checkpoint size, index)
}

// Hashes are a proof's hashes, in JSON one base64 string of them all
// (32 bytes each): shorter to read than an array of strings.
type Hashes []tlog.Hash

func (h Hashes) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(h)*tlog.HashSize)
	for _, x := range h {
		b = append(b, x[:]...)
	}
	out := make([]byte, 0, 2+base64.StdEncoding.EncodedLen(len(b)))
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, b)
	return append(out, '"'), nil
}

// UnmarshalJSON reads the base64 string; base64 needs no JSON escapes,
// so a string with any is refused.
func (h *Hashes) UnmarshalJSON(data []byte) error {
	s, ok := bytes.CutPrefix(data, []byte(`"`))
	s, ok2 := bytes.CutSuffix(s, []byte(`"`))
	if !ok || !ok2 || bytes.IndexByte(s, '\\') >= 0 {
		return errors.New("proof is not a base64 string")
	}
	if len(s) > base64.StdEncoding.EncodedLen(maxProof*tlog.HashSize) {
		return fmt.Errorf("proof of more than %d hashes", maxProof)
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Strict().Decode(b, s)
	if err != nil || n%tlog.HashSize != 0 {
		return errors.New("proof is not base64 of whole hashes")
	}
	*h = make(Hashes, n/tlog.HashSize)
	for i := range *h {
		copy((*h)[i][:], b[i*tlog.HashSize:])
	}
	return nil
}

// Parse reads a receipt strictly: one JSON object of the fields above
// and no others, nothing after it, within the bounds.
func Parse(data []byte) (*Receipt, error) {
	if len(data) > MaxReceipt {
		return nil, fmt.Errorf("receipt: %d bytes, over the limit of %d", len(data), MaxReceipt)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Receipt
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("receipt: not a receipt: %v", err)
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return nil, errors.New("receipt: data after the receipt")
	}
	switch {
	case r.Format != Format:
		return nil, fmt.Errorf("receipt: format %q, this verifier reads %s", clip(r.Format), Format)
	case len(r.Entries) == 0:
		return nil, errors.New("receipt: no entries")
	case len(r.Entries) > MaxEntries:
		return nil, fmt.Errorf("receipt: %d entries, over the limit of %d", len(r.Entries), MaxEntries)
	}
	for i, e := range r.Entries {
		if len(e.Line) > MaxLine {
			return nil, fmt.Errorf("receipt: entry %d: a line of %d bytes, over the limit of %d", i, len(e.Line), MaxLine)
		}
		if e.Index < 0 || i > 0 && e.Index <= r.Entries[i-1].Index {
			return nil, fmt.Errorf("receipt: entry %d: leaf %d is not after the one before it", i, e.Index)
		}
	}
	return &r, nil
}

// Marshal encodes r as the file a receipt is: JSON with each field, and
// each entry, on a line of its own, HTML characters as they are.
func (r *Receipt) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	field := func(sep, name string, v any) error {
		b.WriteString(sep + `"` + name + `":`)
		return enc.Encode(v) // and a newline
	}
	for i, f := range []struct {
		name string
		v    any
	}{{"format", r.Format}, {"origin", r.Origin}, {"key", r.Key}, {"checkpoint", r.Checkpoint},
		{"manifest", r.Manifest}, {"selection", r.Selection}} {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		if err := field(sep, f.name, f.v); err != nil {
			return nil, err
		}
	}
	b.WriteString(`,"entries":[` + "\n")
	for i, e := range r.Entries {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"index":` + strconv.FormatInt(e.Index, 10) + `,"line":`)
		if err := enc.Encode(e.Line); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		proof, _ := e.Proof.MarshalJSON()
		b.WriteString(`,"proof":`)
		b.Write(proof)
		b.WriteString("}\n")
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}
