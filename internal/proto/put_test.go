package proto

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

// HashBehind's digest is the stream's whatever the pieces it came in, and
// a buffer is handed out again only once hashed: a caller that refills
// each buffer as soon as it gets it still gets the stream's digest.
func TestHashBehind(t *testing.T) {
	data := make([]byte, 5<<20+3)
	for i := range data {
		data[i] = byte(i * 31)
	}
	for _, piece := range []int{1, 4 << 10, 1 << 20} {
		hb := NewHashBehind(3, 1<<20)
		for off := 0; off < len(data); {
			b := hb.Buffer()
			n := copy(b[:min(piece, len(b))], data[off:])
			hb.Add(b[:n])
			off += n
		}
		if got := hb.Sum(); got != sha256.Sum256(data) {
			t.Errorf("pieces of %d: digest %x", piece, got)
		}
	}
	if got := NewHashBehind(1, 8).Sum(); got != sha256.Sum256(nil) {
		t.Errorf("nothing added: %x", got)
	}
}

func TestDigestTrailer(t *testing.T) {
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
