package mcp

import (
	"context"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/gateway"
)

type nullSink struct{}

func (nullSink) Append(*gateway.Entry) error { return nil }

// BenchmarkToolsCall: tools/call of the builtin echo tool over streamable
// HTTP on loopback, one session, through the whole pipeline (token check,
// policy, plugin, audit). "file" audits to a real, fsynced log; "noaudit"
// isolates the gateway's own share. Run with -benchtime=2000x for the
// p50/p99 over 2,000 calls.
func BenchmarkToolsCall(b *testing.B) {
	for _, mode := range []string{"file", "noaudit"} {
		b.Run(mode, func(b *testing.B) {
			f := newFixture(b, testConfig, Options{})
			if mode == "noaudit" {
				f.gw = gateway.New(gateway.Options{Audit: nullSink{}, Sandboxes: f.sandbox}, f.gw.Snapshot())
				f.door.gw = f.gw
			}
			cs := f.mustConnect(b, f.token(b, auth.ScopeMCP, "a"))
			params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"argv": []string{"hi"}}}
			lat := make([]time.Duration, 0, b.N)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				res, err := cs.CallTool(ctx, params)
				lat = append(lat, time.Since(start))
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkSessionSetup: connect (initialize + initialized) and close one
// MCP session per iteration.
func BenchmarkSessionSetup(b *testing.B) {
	f := newFixture(b, testConfig, Options{})
	secret := f.token(b, auth.ScopeMCP, "a")
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		cs, err := f.connect(b, secret, nil)
		if err != nil {
			b.Fatal(err)
		}
		cs.Close()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sessions/s")
}
