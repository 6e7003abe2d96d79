package agentloop

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/internal/host/coretools"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
)

// benchSteps is the length of a benchmarked session: the quickstart's.
const benchSteps = 8

const (
	benchToolUse = `{"type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Running the test again."},{"type":"tool_use","id":"toolu_1","name":"exec","input":{"command":"sh calc/test.sh"}}],"stop_reason":"tool_use","usage":{"input_tokens":900,"output_tokens":30}}`
	benchDone    = `{"type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":900,"output_tokens":3}}`
)

// instantModel answers at once: a tool call, and every benchSteps-th time
// the end of the task.
type instantModel struct{ n int }

func (m *instantModel) Send(_ context.Context, _ *modeldoor.Request) (*http.Response, error) {
	m.n++
	body := benchToolUse
	if m.n%benchSteps == 0 {
		body = benchDone
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader([]byte(body)))}, nil
}

// instantGateway runs every call at once.
type instantGateway struct{ snap *gateway.Snapshot }

var benchOutput = &coretools.ExecOutput{Stdout: "PASS: add 2 3 = 5\n"}

func (g instantGateway) Handle(_ context.Context, call *gateway.Call, _ *gateway.Streams) (*gateway.Result, error) {
	call.ID = "id"
	zero := 0
	return &gateway.Result{ExitCode: &zero, Output: benchOutput}, nil
}
func (g instantGateway) Snapshot() *gateway.Snapshot { return g.snap }

type schemaTool struct {
	gateway.Tool
	schema string
}

func (t schemaTool) Schema() string { return t.schema }

func benchSnapshot() *gateway.Snapshot {
	return &gateway.Snapshot{Tools: map[string]gateway.Tool{
		"read": schemaTool{schema: coretools.ReadSchema}, "write": schemaTool{schema: coretools.WriteSchema},
		"patch": schemaTool{schema: coretools.PatchSchema}, "exec": schemaTool{schema: coretools.ExecSchema}}}
}

// The loop's own time per step, model and tool time excluded: the model
// and the gateway answer at once, so what is measured is building each
// request from the conversation, reading the answer, turning the tool
// results into the next turn and saving the session (an fsync'ed file).
// The baseline is the same instant model and gateway called directly, as
// many times, without the loop.
func BenchmarkLoopStep(b *testing.B) {
	snap := benchSnapshot()
	b.Run("baseline", func(b *testing.B) {
		m, g := &instantModel{}, instantGateway{snap: snap}
		for b.Loop() {
			for range benchSteps {
				resp, _ := m.Send(context.Background(), nil)
				_, _ = io.ReadAll(resp.Body)
				_, _ = g.Handle(context.Background(), &gateway.Call{}, nil)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchSteps), "ns/step")
	})
	b.Run("loop", func(b *testing.B) {
		run := &Run{Model: &instantModel{}, Gateway: instantGateway{snap: snap}, Store: NewStore(b.TempDir()), Visible: []string{"read", "write", "patch", "exec"}}
		for b.Loop() {
			sess := &Session{ID: gateway.NewID(), Agent: "demo", Provider: "p", API: model.Anthropic, Model: "m"}
			if stop := run.Do(context.Background(), sess, "task"); stop.Stop != StopDone || sess.Steps != benchSteps {
				b.Fatalf("%+v", stop)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchSteps), "ns/step")
	})
}
