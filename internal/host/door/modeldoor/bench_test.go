package modeldoor

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/guest"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/fakeprovider"
)

// The door's overhead on a streamed answer, beside a direct connection to
// the same fake upstream in the same run: time to the first SSE event
// (p50/p99) and bytes per second of a long stream. "door" is the agent
// socket as the forwarder reaches it; "sandbox" adds the in-sandbox
// forwarder on loopback TCP in front, the whole path a sandbox's client takes.
//
//	go test -run XXX -bench BenchmarkModelDoor -benchtime 2000x ./internal/host/door/modeldoor/
func BenchmarkModelDoor(b *testing.B) {
	h := newHarness(b, "")
	fw := httptest.NewServer(guest.NewModelForwarder(h.sock("demo")))
	defer fw.Close()
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	door := h.client("demo")
	paths := []struct {
		name string
		c    *http.Client
		url  string
	}{
		{"direct", direct, h.fake.URL + "/v1/messages"},
		{"door", door, "http://toolgate/v1/model/anthropic/v1/messages"},
		{"sandbox", direct, fw.URL + "/anthropic/v1/messages"},
	}
	send := func(b *testing.B, c *http.Client, url, model string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"`+model+`","max_tokens":64,"stream":true,"messages":[]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%v %v", resp, err)
		}
		return resp
	}
	for _, p := range paths {
		b.Run("ttft/"+p.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				resp := send(b, p.c, p.url, fakeprovider.ModelText)
				br := bufio.NewReader(resp.Body)
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if len(bytes.TrimSpace(line)) == 0 {
						break // the first event is complete
					}
				}
				lat = append(lat, time.Since(start))
				io.Copy(io.Discard, br)
				resp.Body.Close()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
	h.fake.Chunks = 5000
	for _, p := range paths {
		b.Run("stream/"+p.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				resp := send(b, p.c, p.url, fakeprovider.ModelSlow)
				k, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
				n = k
			}
			b.SetBytes(n)
		})
	}
}
