package egress

import (
	"context"
	"io"
	"testing"
)

const benchChunk = 1 << 20

// pump writes b.N chunks into w and reads them back from r.
func pump(b *testing.B, w io.WriteCloser, r io.Reader) {
	b.SetBytes(benchChunk)
	buf := make([]byte, benchChunk)
	go func() {
		for range b.N {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
		w.Close()
	}()
	b.ResetTimer()
	if n, err := io.Copy(io.Discard, r); err != nil || n != int64(b.N)*benchChunk {
		b.Fatalf("copied %d, %v", n, err)
	}
}

func BenchmarkDirectLoopback(b *testing.B) {
	w, r := tcpPair(b)
	pump(b, w, r)
}

func BenchmarkTunnelLoopback(b *testing.B) {
	w, client := tcpPair(b)
	upstream, r := tcpPair(b)
	go Tunnel(context.Background(), client, upstream, Limits{})
	pump(b, w, r)
}
