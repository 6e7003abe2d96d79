package proto

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

// `toolgate-client put PATH SIZE SHA256|-` replaces PATH with the SIZE bytes
// of its stdin. With a digest in argv (the digest was known before the
// bytes: the gateway held them, or the caller stated it) stdin is exactly
// the content. With PutDigestAfter instead, the gateway hashes the content
// as it passes and stdin is the content followed by DigestTrailer(sum):
// the trailer commits them: put renames only when both came whole, and
// checks the trailer's form, not its digest (the gateway's, of exactly the
// bytes it sent, is the record; a digest in argv put does check). A
// gateway that finds something wrong (a body longer or shorter than
// stated, a stated digest that does not match) ends stdin without the
// trailer, which put refuses like a cut stream.
const PutDigestAfter = "-"

// ExitUsage is the exit code of a toolgate-client command refused for its
// arguments before it read any input: put from a client that predates
// PutDigestAfter answers it to the streamed form.
const ExitUsage = 2

const trailerPrefix = "sha256:"

// DigestTrailerLen is the length of every digest trailer.
const DigestTrailerLen = len(trailerPrefix) + 2*sha256.Size + 1

// DigestTrailer is the line that follows the content of a streamed put:
// "sha256:" and the digest in lowercase hex, then a newline.
func DigestTrailer(sum [sha256.Size]byte) []byte {
	b := make([]byte, 0, DigestTrailerLen)
	b = append(b, trailerPrefix...)
	b = hex.AppendEncode(b, sum[:])
	return append(b, '\n')
}

// ErrBadTrailer is what ParseDigestTrailer answers anything but one exact
// trailer with: a cut stream, a stream that went on, another form.
var ErrBadTrailer = errors.New("the content's digest trailer is missing or malformed")

// ParseDigestTrailer reads the digest from b, which must be exactly one
// trailer as DigestTrailer writes it (what followed the content on stdin,
// to its end).
func ParseDigestTrailer(b []byte) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if len(b) != DigestTrailerLen || !bytes.HasPrefix(b, []byte(trailerPrefix)) || b[len(b)-1] != '\n' {
		return sum, ErrBadTrailer
	}
	h := b[len(trailerPrefix) : len(b)-1]
	if _, err := hex.Decode(sum[:], h); err != nil || !bytes.Equal(h, bytes.ToLower(h)) {
		return sum, ErrBadTrailer
	}
	return sum, nil
}
