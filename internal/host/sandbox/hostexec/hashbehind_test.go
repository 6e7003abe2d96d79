package hostexec

import (
	"crypto/sha256"
	"testing"
)

// hashBehind's digest is the stream's whatever the pieces it came in, and
// a buffer is handed out again only once hashed: a caller that refills
// each buffer as soon as it gets it still gets the stream's digest.
func TestHashBehind(t *testing.T) {
	t.Parallel()
	data := make([]byte, 5<<20+3)
	for i := range data {
		data[i] = byte(i * 31)
	}
	for _, piece := range []int{1, 4 << 10, 1 << 20} {
		hb := newHashBehind(3, 1<<20)
		for off := 0; off < len(data); {
			b := hb.buffer()
			n := copy(b[:min(piece, len(b))], data[off:])
			hb.add(b[:n])
			off += n
		}
		if got := hb.digest(); got != sha256.Sum256(data) {
			t.Errorf("pieces of %d: digest %x", piece, got)
		}
	}
	if got := newHashBehind(1, 8).digest(); got != sha256.Sum256(nil) {
		t.Errorf("nothing added: %x", got)
	}
}
