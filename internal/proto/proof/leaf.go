package proof

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// A log line ends in its own hash, `…,"hash":"<64 hex>"}`: the SHA-256 of
// the line with that slot empty (`…,"hash":""}`). So the hash commits to
// every byte of the line, and the tree's leaf needs only those 32 bytes.
const (
	hashKey    = `,"hash":"`
	hashHexLen = 2 * sha256.Size
	suffixLen  = len(hashKey) + hashHexLen + len(`"}`)
)

// LeafHash is the tree's leaf hash of the line whose chain hash is
// lineHash: RFC 6962's leaf hash of those 32 bytes, SHA-256(0x00 ‖ data),
// as tlog.RecordHash computes it (TestLeafHashIsRecordHash) without its
// allocation: the writer computes one per line.
func LeafHash(lineHash [sha256.Size]byte) tlog.Hash {
	var b [1 + sha256.Size]byte
	copy(b[1:], lineHash[:])
	return sha256.Sum256(b[:])
}

// ClaimedHash returns the hash a line (without its newline) ends with, not
// checked; ok is false when it ends in no hash field.
func ClaimedHash(line []byte) (h [sha256.Size]byte, ok bool) {
	n := len(line)
	if n < suffixLen+1 || line[0] != '{' || !bytes.HasSuffix(line, []byte(`"}`)) ||
		!bytes.Equal(line[n-suffixLen:n-suffixLen+len(hashKey)], []byte(hashKey)) {
		return h, false
	}
	_, err := hex.Decode(h[:], line[n-2-hashHexLen:n-2])
	return h, err == nil && isLowerHex(line[n-2-hashHexLen:n-2])
}

func isLowerHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ErrNoHash: the line does not end in a hash field.
var ErrNoHash = errors.New("not an audit line: no trailing hash field")

// LineHash checks that a line (without its newline) hashes to the hash it
// ends with, and returns that hash.
func LineHash(line []byte) ([sha256.Size]byte, error) {
	claimed, ok := ClaimedHash(line)
	if !ok {
		return claimed, ErrNoHash
	}
	h := sha256.New()
	h.Write(line[:len(line)-2-hashHexLen])
	h.Write([]byte(`"}`))
	var got [sha256.Size]byte
	h.Sum(got[:0])
	if got != claimed {
		return claimed, fmt.Errorf("the line was changed: its bytes hash to %.12x…, its hash field says %.12x…", got[:], claimed[:])
	}
	return claimed, nil
}
