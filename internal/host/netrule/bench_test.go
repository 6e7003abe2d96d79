package netrule

import "testing"

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
