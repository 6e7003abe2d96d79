// Package audit is the tamper-evident audit log: append-only JSON lines,
// each carrying the SHA-256 of its own bytes and the hash of the line before
// it, so any edited, removed, inserted or reordered line breaks the chain.
// Beside the chain the writer keeps a Merkle tree over the lines (tree.go)
// and, with a key, writes signed checkpoints of it into the log itself
// (checkpoint.go): what receipts prove against (package proof), so the
// log can prove itself to someone who does not trust this host.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// The hash is the last field of every line: `…,"hash":"<64 hex>"}`. The hash
// covers the line as written with that slot empty (`…,"hash":""}`), so
// verification works on the bytes on disk and never re-marshals.
const (
	hashKey    = `,"hash":"`
	hashHexLen = 2 * sha256.Size
	suffixLen  = len(hashKey) + hashHexLen + len(`"}`)
)

var errNoHash = errors.New("not an audit entry: no trailing hash field")

// encodeLine appends e as one chained line (with its newline) to dst and
// sets e.Prev and e.Hash. enc must write into dst.
func encodeLine(dst *bytes.Buffer, enc *json.Encoder, e *gateway.Entry, prev string) error {
	start := dst.Len()
	e.Prev, e.Hash = prev, ""
	if err := enc.Encode(e); err != nil {
		dst.Truncate(start)
		return fmt.Errorf("audit: encode entry: %w", err)
	}
	// Encode wrote `…,"hash":""}\n`: hash everything but the newline.
	sum := sha256.Sum256(dst.Bytes()[start : dst.Len()-1])
	e.Hash = hex.EncodeToString(sum[:])
	dst.Truncate(dst.Len() - len("\"}\n"))
	dst.WriteString(e.Hash)
	dst.WriteString("\"}\n")
	return nil
}

// claimedHash returns the hash a line (without its newline) claims, or nil
// when the line does not end in a hash field. It does not check the hash.
func claimedHash(line []byte) []byte {
	n := len(line)
	if n < suffixLen+1 || line[0] != '{' || !bytes.HasSuffix(line, []byte(`"}`)) ||
		!bytes.Equal(line[n-suffixLen:n-suffixLen+len(hashKey)], []byte(hashKey)) {
		return nil
	}
	return line[n-2-hashHexLen : n-2]
}

// lineHash is claimedHash as a string, "" for none.
func lineHash(line []byte) string { return string(claimedHash(line)) }

var errEdited = errors.New("hash mismatch: the line was edited")

// parseLine checks one line (without its newline): a JSON entry whose hash
// covers its own bytes. The link to the previous line is the caller's check.
func parseLine(line []byte) (*gateway.Entry, error) {
	claimed := claimedHash(line)
	if claimed == nil {
		return nil, errNoHash
	}
	e, err := decodeLine(line, claimed)
	if err != nil {
		return nil, err
	}
	if !newLinkChecker().hashOK(line, claimed) {
		return nil, errEdited
	}
	return e, nil
}

// decodeLine decodes a line that claims the hash claimed.
func decodeLine(line, claimed []byte) (*gateway.Entry, error) {
	var e gateway.Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return nil, fmt.Errorf("not a valid entry: %v", err)
	}
	if e.Hash != string(claimed) {
		return nil, errors.New("not a valid entry: hash field is not the last field")
	}
	return &e, nil
}

// linkChecker checks lines as parseLine does, but returns only their link,
// reusing its hash state from line to line: what Verify needs, fast.
type linkChecker struct {
	h   hash.Hash
	sum []byte
	hex [hashHexLen]byte
}

func newLinkChecker() *linkChecker {
	return &linkChecker{h: sha256.New(), sum: make([]byte, 0, sha256.Size)}
}

// link checks one line (without its newline) and returns its prev and
// hash, slices of line, and its type. It accepts and rejects exactly the
// lines parseLine does, with the same errors: fastLink takes the writer's
// own lines, and any other is decoded.
func (c *linkChecker) link(line []byte) (prev, hash []byte, typ gateway.Kind, err error) {
	claimed := claimedHash(line)
	if claimed == nil {
		return nil, nil, "", errNoHash
	}
	prev, t, ok := fastLink(line, claimed)
	typ = gateway.Kind(t)
	if !ok {
		e, err := decodeLine(line, claimed)
		if err != nil {
			return nil, nil, "", err
		}
		prev, typ = []byte(e.Prev), e.Type
	}
	if !c.hashOK(line, claimed) {
		return nil, nil, "", errEdited
	}
	return prev, claimed, typ, nil
}

// hashOK reports whether line hashes to claimed: SHA-256 of the line with
// the hash slot empty, as encodeLine computed it.
func (c *linkChecker) hashOK(line, claimed []byte) bool {
	c.h.Reset()
	c.h.Write(line[:len(line)-2-hashHexLen])
	c.h.Write([]byte(`"}`))
	c.sum = c.h.Sum(c.sum[:0])
	hex.Encode(c.hex[:], c.sum)
	return bytes.Equal(c.hex[:], claimed)
}

// CheckLine checks that one line of the log (as the index keeps it, with or
// without its newline) hashes to the hash it claims, and returns its entry.
// Its link to the line before it is the caller's check: its Prev must be
// that line's Hash.
func CheckLine(line []byte) (*gateway.Entry, error) {
	return parseLine(bytes.TrimSuffix(line, []byte("\n")))
}
