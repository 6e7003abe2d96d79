package hookserver

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/hookcall"
	"github.com/toolgate/toolgate/internal/testenv/tmpdir"
)

// BenchmarkStartup: New on a log of the given size. "state" loads the saved
// dedup state and reads the log after its position; "scan" reads the
// window of the log (what New does with no usable state); "oldscan" is the
// start-up before the state existed: the window read twice, once per type.
func BenchmarkStartup(b *testing.B) {
	for _, mb := range []int{64, 256} {
		dir := tmpdir.For(b) // 320 MiB of logs: not left behind by a killed run
		auditDir := filepath.Join(dir, "logs")
		aw, err := audit.Open(auditDir, audit.Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		pad := strings.Repeat("x", 400)
		now := time.Now().UTC()
		for i := 0; i < mb<<20/600; i++ {
			e := &gateway.Entry{TS: now, ID: gateway.NewID(), Phase: gateway.PhaseDecision, Agent: "demo",
				Type: gateway.KindCore, Tool: "exec", Decision: "allow", Args: json.RawMessage(`{"command":"` + pad + `"}`)}
			if i%10 == 0 {
				e.Type, e.Decision, e.Detail = gateway.KindHook, hookcall.DecisionReported, map[string]any{"event_id": fmt.Sprint("ev", i)}
			}
			aw.Enqueue(e)
		}
		if err := aw.Flush(); err != nil {
			b.Fatal(err)
		}
		gw := gateway.New(gateway.Options{Audit: aw, Logger: quiet}, &gateway.Snapshot{})
		opts := Options{Gateway: gw, AuditDir: auditDir, Logger: quiet, StatePath: filepath.Join(dir, StateFile), Position: aw.Position}
		hs, err := New(opts) // the first start reads the log and saves the state
		if err != nil {
			b.Fatal(err)
		}
		hs.dirty = true
		if err := hs.Close(); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("log=%dMB/state", mb), func(b *testing.B) {
			for b.Loop() {
				hs, err := New(opts)
				if err != nil {
					b.Fatal(err)
				}
				hs.Close()
			}
		})
		b.Run(fmt.Sprintf("log=%dMB/scan", mb), func(b *testing.B) {
			scan := opts
			scan.StatePath = ""
			for b.Loop() {
				if _, err := New(scan); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("log=%dMB/oldscan", mb), func(b *testing.B) {
			for b.Loop() {
				seen := newRecent(DefaultRecent)
				since := time.Now().Add(-DefaultDedupWindow)
				for _, typ := range []gateway.Kind{gateway.KindHook, gateway.KindObserved} {
					err := audit.Query(auditDir, audit.Filter{Type: string(typ), Since: since}, func(e *gateway.Entry) error {
						if id := recordedID(e); id != "" {
							seen.add(e.Agent, id, e.TS.Unix())
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		aw.Close()
	}
}
