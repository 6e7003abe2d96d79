package agentloop_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/agentloop"
	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/scripted"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv"
)

// rig is a real gateway on a real Docker sandbox, with the default rule
// that denies recursive deletes, and a fake provider (httptest) serving the
// quickstart's script in both API shapes.
type rig struct {
	t      *testing.T
	dir    string
	agent  string
	gw     *gateway.Gateway
	model  agentloop.Model
	store  *agentloop.Store
	events []agentloop.Event
}

func newRig(t *testing.T) *rig {
	testenv.NeedDocker(t)
	_, clientBin := testenv.Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	fake := httptest.NewServer(scripted.Default())
	t.Cleanup(fake.Close)

	dir := t.TempDir()
	agent := testenv.Prefix() + "loop"
	t.Cleanup(func() { _ = testenv.RemoveSandboxes(testenv.Prefix()) })
	cfg, err := config.Parse(dir, "c.yaml", []byte(fmt.Sprintf(`gateway:
  models:
    fake-anthropic: {api: anthropic, url: %[1]q, private: allow}
    fake-openai: {api: openai, url: %[1]q, private: allow}
defaults:
  model: {providers: [fake-anthropic, fake-openai]}
  rules:
    - name: no-recursive-delete
      deny: commands.exists(c, c.name == "rm" && c.flags.exists(f, f in ["r", "R", "recursive"]))
      reason: recursive deletion is not allowed
agents:
  %[2]s:
    workspace: %[3]s
  %[2]s-budget:
    workspace: %[3]s-budget
    model:
      providers: [fake-anthropic]
      budget: {tokensPerHour: 100}
`, fake.URL, agent, filepath.Join(dir, agent, "workspace"))))
	if err != nil {
		t.Fatal(err)
	}
	b, err := assemble.Build(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := docker.New(ctx, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.BuildDefaultImage(ctx, proto.DefaultImage, false); err != nil {
		t.Fatal(err)
	}
	if err := m.SetSpecs(b.Specs(clientBin)); err != nil {
		t.Fatal(err)
	}
	aw, err := audit.Open(filepath.Join(dir, "logs"), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aw.Close() })
	gw := gateway.New(gateway.Options{Audit: aw, Sandboxes: m}, b.Snapshot)
	return &rig{t: t, dir: dir, agent: agent, gw: gw, model: modeldoor.New(gw),
		store: agentloop.NewStore(filepath.Join(dir, "sessions"))}
}

func (r *rig) run(ctx context.Context, sess *agentloop.Session, task string, stream bool, lim agentloop.Limits) agentloop.Event {
	run := &agentloop.Run{Model: r.model, Gateway: r.gw, Store: r.store, Visible: config.CoreTools, Stream: stream, Limits: lim,
		Emit: func(e agentloop.Event) { r.events = append(r.events, e) }}
	return run.Do(ctx, sess, task)
}

func (r *rig) session(api model.API) *agentloop.Session {
	return &agentloop.Session{ID: gateway.NewID(), Agent: r.agent, Provider: "fake-" + string(api), API: api, Model: scripted.Model, Created: time.Now()}
}

// entries reads the audit log.
func (r *rig) entries() []gateway.Entry {
	f, err := os.Open(filepath.Join(r.dir, "logs", "audit.jsonl"))
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	var out []gateway.Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e gateway.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// The built-in loop completes the quickstart's multi-step task in a real
// sandbox, in both API shapes, streamed and not: it writes, runs a failing
// test, reads, patches, runs it again, gets a recursive delete denied by a
// rule — which reaches the model as an error, and the loop goes on — and
// ends. Every tool call is on the record with the session and, as parent,
// the tool_use id of the model's answer that asked for it.
func TestDockerLoopCompletesTask(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct {
		api    model.API
		stream bool
	}{{model.Anthropic, true}, {model.Anthropic, false}, {model.OpenAI, true}, {model.OpenAI, false}} {
		t.Run(fmt.Sprintf("%s/stream=%v", tc.api, tc.stream), func(t *testing.T) {
			r.events = nil
			ws := filepath.Join(r.dir, r.agent, "workspace")
			_ = os.RemoveAll(filepath.Join(ws, "calc"))
			sess := r.session(tc.api)
			stop := r.run(context.Background(), sess, "fix the calculator", tc.stream, agentloop.Limits{})
			if stop.Stop != agentloop.StopDone || stop.Error != "" {
				t.Fatalf("stop: %+v\nevents: %+v", stop, r.events)
			}
			if sess.Steps != len(scripted.Default().Turns) {
				t.Fatalf("steps %d, want %d", sess.Steps, len(scripted.Default().Turns))
			}
			last := sess.Messages[len(sess.Messages)-1]
			if !strings.HasPrefix(last.Text, "Done:") {
				t.Fatalf("the script did not get where it expected; last answer: %q", last.Text)
			}
			code, err := os.ReadFile(filepath.Join(ws, "calc", "add.sh"))
			if err != nil || !strings.Contains(string(code), "$1 + $2") {
				t.Fatalf("add.sh not patched: %q %v", code, err)
			}
			var denied, fails, passes int
			for _, e := range r.events {
				if e.Type != "result" {
					continue
				}
				switch {
				case e.Decision == "deny":
					denied++
					if e.Rule != "no-recursive-delete" || !e.IsError || !strings.Contains(e.Output, "recursive deletion is not allowed") {
						t.Errorf("denial as the model saw it: %+v", e)
					}
				case e.Decision != "allow" || e.ID == "":
					t.Errorf("result: %+v", e)
				case e.ExitCode != nil && *e.ExitCode == 1:
					fails++
				case strings.Contains(e.Output, "PASS"):
					passes++
				}
			}
			if denied != 1 || fails != 1 || passes != 1 {
				t.Fatalf("denied %d, failed runs %d, passing runs %d; events %+v", denied, fails, passes, r.events)
			}
			// The record: each of the session's tool calls with its parent,
			// a tool_use id the model emitted.
			ids, emitted := map[string]bool{}, map[string]bool{}
			for _, m := range sess.Messages {
				for _, c := range m.Calls {
					ids[c.ID], emitted[c.ID] = true, true
				}
			}
			calls, answers := 0, 0
			for _, e := range r.entries() {
				if e.Session != sess.ID {
					continue
				}
				if e.Type == gateway.KindModel {
					// The model's answers, through the model door: their
					// result entries list the tool_use ids.
					if e.Phase == gateway.PhaseResult {
						answers++
						ids, _ := e.Detail["toolUseIds"].([]any)
						for _, id := range ids {
							delete(emitted, id.(string))
						}
					}
					continue
				}
				if e.Phase != gateway.PhaseDecision {
					continue
				}
				calls++
				if e.Via != agentloop.Via || !ids[e.Parent] {
					t.Errorf("entry %s %s: via %q parent %q", e.ID, e.Tool, e.Via, e.Parent)
				}
			}
			if calls != len(ids) || answers != sess.Steps || len(emitted) != 0 {
				t.Fatalf("on the record for the session: %d tool calls (want %d), %d model answers (want %d); tool_use ids no answer lists: %v",
					calls, len(ids), answers, sess.Steps, emitted)
			}
		})
	}
}

// A run stopped half way (Ctrl-C while it waits for the model) keeps the
// session as it was after its last whole step; continuing it finishes the
// task. Step and token limits stop a run with the reason.
func TestDockerLoopInterruptAndLimits(t *testing.T) {
	r := newRig(t)
	sess := r.session(model.Anthropic)
	ctx, cancel := context.WithCancel(context.Background())
	r.model = cancelAfter{Model: r.model, n: 3, cancel: cancel, sent: new(int)}
	stop := r.run(ctx, sess, "task", true, agentloop.Limits{})
	if stop.Stop != agentloop.StopInterrupted {
		t.Fatalf("stop: %+v", stop)
	}
	saved, err := r.store.Load(sess.ID)
	if err != nil || saved.Stop != agentloop.StopInterrupted || saved.Steps != 2 {
		t.Fatalf("saved: %+v %v", saved, err)
	}
	r.model = r.model.(cancelAfter).Model
	stop = r.run(context.Background(), saved, "", true, agentloop.Limits{})
	if stop.Stop != agentloop.StopDone || saved.Steps != len(scripted.Default().Turns) {
		t.Fatalf("continued: %+v steps %d", stop, saved.Steps)
	}
	if last := saved.Messages[len(saved.Messages)-1]; !strings.HasPrefix(last.Text, "Done:") {
		t.Fatalf("continued session ended with %q", last.Text)
	}
	// A finished session takes a new task only.
	if stop = r.run(context.Background(), saved, "", true, agentloop.Limits{}); stop.Error == "" {
		t.Fatalf("continuing a finished session without a task: %+v", stop)
	}

	sess = r.session(model.OpenAI)
	if stop = r.run(context.Background(), sess, "task", false, agentloop.Limits{Steps: 2}); stop.Stop != agentloop.StopSteps || sess.Steps != 2 {
		t.Fatalf("step limit: %+v", stop)
	}
	sess = r.session(model.OpenAI)
	if stop = r.run(context.Background(), sess, "task", false, agentloop.Limits{Tokens: 1}); stop.Stop != agentloop.StopTokens || sess.Steps != 1 {
		t.Fatalf("token limit: %+v", stop)
	}
}

// The model door's budget stops the loop with its reason: the first answer
// spends the agent's tokens for the hour, the next request is denied.
func TestDockerLoopBudget(t *testing.T) {
	r := newRig(t)
	sess := r.session(model.Anthropic)
	sess.Agent = r.agent + "-budget"
	stop := r.run(context.Background(), sess, "task", true, agentloop.Limits{})
	if stop.Stop != agentloop.StopDenied || !strings.Contains(stop.Error, model.RuleTokens) || !strings.Contains(stop.Error, "per hour") || sess.Steps != 1 {
		t.Fatalf("stop: %+v steps %d", stop, sess.Steps)
	}
	denied := false
	for _, e := range r.entries() {
		if e.Session == sess.ID && e.Type == gateway.KindModel && e.Decision == "deny" && e.Rule == model.RuleTokens {
			denied = true
		}
	}
	if !denied {
		t.Fatal("the denied model request is not on the record")
	}
}
