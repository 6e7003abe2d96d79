// Package audit is the tamper-evident audit log: append-only JSON lines,
// each carrying the SHA-256 of its own bytes and the hash of the line before
// it, so any edited, removed, inserted or reordered line breaks the chain.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/gateway"
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

// lineHash returns the hash a line (without its newline) claims, or "" when
// the line does not end in a hash field. It does not check the hash.
func lineHash(line []byte) string {
	n := len(line)
	if n < suffixLen+1 || line[0] != '{' || !bytes.HasSuffix(line, []byte(`"}`)) ||
		!bytes.Equal(line[n-suffixLen:n-suffixLen+len(hashKey)], []byte(hashKey)) {
		return ""
	}
	return string(line[n-2-hashHexLen : n-2])
}

// parseLine checks one line (without its newline): a JSON entry whose hash
// covers its own bytes. The link to the previous line is the caller's check.
func parseLine(line []byte) (*gateway.Entry, error) {
	claimed := lineHash(line)
	if claimed == "" {
		return nil, errNoHash
	}
	var e gateway.Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return nil, fmt.Errorf("not a valid entry: %v", err)
	}
	if e.Hash != claimed {
		return nil, errors.New("not a valid entry: hash field is not the last field")
	}
	h := sha256.New()
	h.Write(line[:len(line)-2-hashHexLen])
	h.Write([]byte(`"}`))
	if hex.EncodeToString(h.Sum(nil)) != claimed {
		return nil, errors.New("hash mismatch: the line was edited")
	}
	return &e, nil
}

// CheckLine checks that one line of the log (as the index keeps it, with or
// without its newline) hashes to the hash it claims, and returns its entry.
// Its link to the line before it is the caller's check: its Prev must be
// that line's Hash.
func CheckLine(line []byte) (*gateway.Entry, error) {
	return parseLine(bytes.TrimSuffix(line, []byte("\n")))
}
