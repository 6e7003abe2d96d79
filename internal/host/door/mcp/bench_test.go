package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

type nullSink struct{}

func (nullSink) Append(*gateway.Entry) error { return nil }

// BenchmarkToolsCall: tools/call of the builtin echo tool over streamable
// HTTP on loopback, one session, through the whole pipeline (token check,
// policy, plugin, audit). "file" audits to a real, fsynced log and waits for
// both entries; "deployed" is the daemon's setting (the decision fsynced,
// the result written behind the answer); "noaudit" drops the disk; "bare"
// is the same SDK client and server with a tool that answers at once and no
// gateway at all, so noaudit − bare is the gateway's own share. Run with
// -benchtime=2000x for the p50/p99 over 2,000 calls.
func BenchmarkToolsCall(b *testing.B) {
	for _, mode := range []string{"file", "deployed", "noaudit", "bare"} {
		b.Run(mode, func(b *testing.B) {
			var cs *sdk.ClientSession
			if mode == "bare" {
				cs = bareSDK(b)
			} else {
				f := newFixture(b, testConfig, Options{})
				switch mode {
				case "noaudit":
					f.gw = gateway.New(gateway.Options{Audit: nullSink{}, Sandboxes: f.sandbox}, f.gw.Snapshot())
				case "deployed":
					f.gw = gateway.New(gateway.Options{Audit: f.audit, Sandboxes: f.sandbox, AsyncResults: true}, f.gw.Snapshot())
				}
				f.door.gw = f.gw
				cs = f.mustConnect(b, f.token(b, auth.ScopeMCP, "a"))
			}
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

// bareSDK is the go-sdk alone: a streamable HTTP server whose echo tool
// answers at once, and a session with it — the floor under the door.
func bareSDK(b *testing.B) *sdk.ClientSession {
	srv := sdk.NewServer(&sdk.Implementation{Name: "bare", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hi\n"}}}, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	b.Cleanup(hs.Close)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}
