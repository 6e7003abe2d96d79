package egress

import (
	"context"
	"io"
	"testing"
)

func BenchmarkParseTargetClassify(b *testing.B) {
	inputs := []string{
		"files.pythonhosted.org:443", "Bücher.example.:443", "0xa9fea9fe:80",
		"[64:ff9b::a9fe:a9fe]:80", "[2606:4700::1111]:443", "10.1.2.3:5432",
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tg, err := ParseTarget(inputs[i%len(inputs)])
		if err != nil {
			b.Fatal(err)
		}
		if tg.IsIP() {
			Classify(tg.Addr)
		}
	}
}

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
