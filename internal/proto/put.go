package proto

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
)

// `toolgate-client put PATH SIZE SHA256|-` replaces PATH with the SIZE bytes
// of its stdin. With a digest in argv (the digest was known before the
// bytes: the gateway held them, or the caller stated it) stdin is exactly
// the content. With PutDigestAfter instead, the gateway hashes the content
// as it passes and stdin is the content followed by DigestTrailer(sum):
// put renames only when both came whole and its own SHA-256 of the bytes
// it wrote is that sum. A gateway that finds something wrong (a body
// longer or shorter than stated, a stated digest that does not match)
// ends stdin without the trailer, which put refuses like a cut stream.
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

// HashBehind computes a stream's SHA-256 on a goroutine of its own while
// the caller moves the bytes on: a copy and its digest use two cores, not
// one after the other. The caller takes a buffer, fills it, Adds what it
// filled, and may keep reading that slice until it takes its next buffer;
// a buffer comes back only once it is hashed, so at most bufs buffers of
// size bytes are held whatever the stream's length.
type HashBehind struct {
	free chan []byte
	work chan []byte
	sum  chan [sha256.Size]byte
	h    hash.Hash
}

// NewHashBehind starts a hasher with bufs buffers of size bytes.
func NewHashBehind(bufs, size int) *HashBehind {
	hb := &HashBehind{free: make(chan []byte, bufs), work: make(chan []byte, bufs), sum: make(chan [sha256.Size]byte, 1), h: sha256.New()}
	for range bufs {
		hb.free <- make([]byte, size)
	}
	go func() {
		for p := range hb.work {
			hb.h.Write(p)
			hb.free <- p[:cap(p)]
		}
		var s [sha256.Size]byte
		hb.h.Sum(s[:0])
		hb.sum <- s
	}()
	return hb
}

// Buffer is a free buffer, waiting while every one is still being hashed.
func (hb *HashBehind) Buffer() []byte { return <-hb.free }

// Add hashes p, a prefix of the last Buffer, behind the caller.
func (hb *HashBehind) Add(p []byte) { hb.work <- p }

// Sum waits until everything added is hashed and returns the digest; it
// ends the hasher, and nothing may be added after it. A stream abandoned
// half way calls it too, so the goroutine ends.
func (hb *HashBehind) Sum() [sha256.Size]byte {
	close(hb.work)
	return <-hb.sum
}
