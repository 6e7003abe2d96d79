package proto

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

func TestDigestTrailer(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("content"))
	tr := DigestTrailer(sum)
	if len(tr) != DigestTrailerLen {
		t.Fatalf("trailer %q is %d bytes, want %d", tr, len(tr), DigestTrailerLen)
	}
	if got, err := ParseDigestTrailer(tr); err != nil || got != sum {
		t.Fatalf("parse %q: %x, %v", tr, got, err)
	}
	for _, bad := range [][]byte{nil, tr[:10], tr[:len(tr)-1], append(bytes.Clone(tr), 'x'), bytes.ToUpper(tr),
		bytes.Replace(tr, []byte("sha256:"), []byte("sha512:"), 1), bytes.Replace(tr, []byte("\n"), []byte("\r"), 1),
		append([]byte("sha256:"), bytes.Repeat([]byte("g"), 64+1)...)} {
		if _, err := ParseDigestTrailer(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// What follows a streamed put's content is the gateway's, but put must
// accept only the one form: whatever it accepts is a trailer it would
// have written itself.
func FuzzParseDigestTrailer(f *testing.F) {
	f.Add(DigestTrailer(sha256.Sum256(nil)))
	f.Add([]byte("sha256:\n"))
	f.Add(bytes.ToUpper(DigestTrailer(sha256.Sum256([]byte("x")))))
	f.Fuzz(func(t *testing.T, in []byte) {
		sum, err := ParseDigestTrailer(in)
		if err == nil && !bytes.Equal(DigestTrailer(sum), in) {
			t.Fatalf("accepted %q, which is not the trailer of %x", in, sum)
		}
	})
}
