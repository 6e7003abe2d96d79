package hookserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/hookcall"
	"github.com/toolgate/toolgate/internal/host/policy"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/testenv"
)

// policyYAML shows the same rules written for exec and for Claude Code's
// tools: command is Bash's command, path the file a file tool touches.
const policyYAML = `agents:
  %s:
    rules:
      - name: no-rm-rf
        deny: 'command.contains("rm -rf")'
        reason: no recursive removal
      - name: no-etc-writes
        deny: 'kind == "hook" && tool in ["Write", "Edit", "MultiEdit"] && path.startsWith("/etc/")'
        reason: /etc is not the agent's to change
      - name: no-shadow
        deny: 'path == "/etc/shadow"'
        reason: shadow is off limits
      - name: no-harness-mcp
        deny: 'kind == "hook" && tool.startsWith("mcp__harness__") && has(args.name) && args.name == "forbidden"'
        reason: that marker is forbidden
`

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const secret = "s3cr3t-t0ken-value"

type env struct {
	gw       *gateway.Gateway
	aw       *audit.Writer
	auditDir string
	agents   *agentsock.Server
	hs       *Server
	opts     Options
	sock     string
	agent    string
	uid, gid int
	hc       *http.Client // one client, one kept-alive connection: a fuzzer posts thousands
}

// newEnv runs a gateway with the policy above, a real audit writer, the
// hook tool and the hook routes on one agent socket at sockPath (a temp
// path when empty), owned by owner (uid, gid; the current user when empty).
func newEnv(t testing.TB, agent, sockPath, workspace string, owner ...int) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir(), agent, sockPath, workspace, owner...)
}

// newEnvIn is newEnv with its state (config, audit log, socket) in dir.
func newEnvIn(t testing.TB, dir, agent, sockPath, workspace string, owner ...int) *env {
	t.Helper()
	cfg, err := config.Parse(dir, "config.yaml", []byte(strings.ReplaceAll(policyYAML, "%s", agent)))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{auditDir: filepath.Join(dir, "audit"), agent: agent, sock: sockPath}
	if e.sock == "" {
		e.sock = filepath.Join(dir, "sock", proto.SocketName)
	}
	if e.aw, err = audit.Open(e.auditDir, audit.Options{}); err != nil {
		t.Fatal(err)
	}
	bounder := audit.NewBounder(1024)
	bounder.AddSecrets(secret)
	snap := &gateway.Snapshot{
		Agents:  map[string]gateway.AgentInfo{agent: {Name: agent, Workspace: proto.WorkspacePath, HostDir: workspace}},
		Tools:   map[string]gateway.Tool{},
		ByKind:  map[gateway.Kind]gateway.Tool{gateway.KindHook: hookcall.Tool()},
		Decider: eng,
	}
	e.gw = gateway.New(gateway.Options{Audit: e.aw, BoundArgs: bounder.Bound, Logger: quiet}, snap)
	e.opts = Options{Gateway: e.gw, AuditDir: e.auditDir, Logger: quiet}
	if e.hs, err = New(e.opts); err != nil {
		t.Fatal(err)
	}
	e.agents = agentsock.New(e.gw, agentsock.Options{Logger: quiet})
	e.hs.Mount(e.agents)
	uid, gid := os.Getuid(), os.Getgid()
	if len(owner) == 2 {
		uid, gid = owner[0], owner[1]
	}
	e.uid, e.gid = uid, gid
	if err := e.agents.Serve(agent, e.sock, uid, gid); err != nil {
		t.Fatal(err)
	}
	e.hc = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.sock)
	}}}
	t.Cleanup(func() {
		e.hc.CloseIdleConnections()
		e.agents.Close()
		e.aw.Close()
	})
	return e
}

func (e *env) post(t testing.TB, path string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := e.hc.Post("http://toolgate"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *env) gate(t testing.TB, body []byte) proto.GateAnswer {
	t.Helper()
	status, b := e.post(t, proto.PreToolUsePath, body)
	if status != http.StatusOK {
		t.Fatalf("gate: %d %s", status, b)
	}
	var ga proto.GateAnswer
	if err := json.Unmarshal(b, &ga); err != nil {
		t.Fatal(err)
	}
	return ga
}

func (e *env) entries(t testing.TB, f audit.Filter) []*gateway.Entry {
	t.Helper()
	var out []*gateway.Entry
	if err := audit.Query(e.auditDir, f, func(en *gateway.Entry) error {
		out = append(out, en)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "proto", "hooks", "testdata", "claude-code-samples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// preInput is a PreToolUse input for tool with tool_input.
func preInput(tool, toolUseID string, input any) []byte {
	b, _ := json.Marshal(map[string]any{
		"session_id": "sess-1", "cwd": "/workspace/proj", "hook_event_name": "PreToolUse",
		"tool_name": tool, "tool_input": input, "tool_use_id": toolUseID, "permission_mode": "default",
	})
	return b
}

func TestGateDecides(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	tests := []struct {
		name  string
		body  []byte
		allow bool
		rule  string
	}{
		{"captured Bash sample", sample(t, "hook-input-PreToolUse-Bash.json"), true, ""},
		{"captured MCP sample", sample(t, "hook-input-PreToolUse-mcp.json"), true, ""},
		{"Bash rm -rf", preInput("Bash", "toolu_rm", map[string]any{"command": "cd / && rm -rf tmp"}), false, "no-rm-rf"},
		{"Write into /etc", preInput("Write", "toolu_w", map[string]any{"file_path": "/etc/cron.d/x", "content": "* * * * * evil"}), false, "no-etc-writes"},
		{"Read relative escape", preInput("Read", "toolu_r", map[string]any{"file_path": "../../etc/shadow"}), false, "no-shadow"},
		{"Read in the project", preInput("Read", "toolu_ok", map[string]any{"file_path": "src/main.go"}), true, ""},
		{"MCP forbidden args", preInput("mcp__harness__touch_marker", "toolu_m", map[string]any{"name": "forbidden"}), false, "no-harness-mcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ga := e.gate(t, tt.body)
			if ga.Allow != tt.allow || (!tt.allow && ga.Rule != tt.rule) {
				t.Fatalf("got %+v, want allow=%v rule=%q", ga, tt.allow, tt.rule)
			}
			got := e.entries(t, audit.Filter{ID: ga.ID, Type: "hook"})
			if len(got) == 0 {
				t.Fatalf("no audit entry for %s", ga.ID)
			}
			d := got[0]
			if d.Phase != gateway.PhaseDecision || d.Decision != (gateway.Decision{Allow: ga.Allow, Ask: ga.Ask}).Verdict() || d.Via != hookcall.ViaHook || d.Detail["tool_use_id"] == nil || d.Detail["peer"] == nil {
				t.Fatalf("decision entry %+v", d)
			}
		})
	}
	// File bodies are kept as sizes in the audit, not as text.
	for _, en := range e.entries(t, audit.Filter{Type: "hook", Tool: "Write"}) {
		if strings.Contains(string(en.Args), "evil") || !strings.Contains(string(en.Args), `"bytes":14`) {
			t.Fatalf("Write args in the audit: %s", en.Args)
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGateBadInputDeniesAndRecords(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	huge := append([]byte(`{"hook_event_name":"PreToolUse","tool_name":"Write","tool_use_id":"t","tool_input":{"file_path":"/workspace/x","content":"`),
		bytes.Repeat([]byte("a"), 20<<20)...)
	huge = append(huge, `"}}`...)
	tests := []struct {
		name, body, want string
	}{
		{"empty", "", "empty"},
		{"not JSON", "hello", "not a JSON object"},
		{"missing tool_name", `{"hook_event_name":"PreToolUse","tool_input":{},"tool_use_id":"t"}`, "tool_name"},
		{"unknown event", `{"hook_event_name":"PreToolUsed","tool_name":"Bash","tool_input":{},"tool_use_id":"t"}`, "unknown hook event"},
		{"tool_input wrong type", `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":"ls","tool_use_id":"t"}`, "tool_input"},
		{"Bash without command", `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"cmd":"ls"},"tool_use_id":"t"}`, "tool_input.command"},
		{"post event at the gate", string(sample(t, "hook-input-PostToolUse-Bash.json")), "the gate takes PreToolUse"},
		{"20 MiB", string(huge), "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ga := e.gate(t, []byte(tt.body))
			if ga.Allow || ga.Rule != RuleInput || !strings.Contains(ga.Reason, tt.want) {
				t.Fatalf("got %+v, want a %s deny mentioning %q", ga, RuleInput, tt.want)
			}
			got := e.entries(t, audit.Filter{ID: ga.ID})
			if len(got) != 1 || got[0].Decision != "deny" || got[0].Type != gateway.KindHook {
				t.Fatalf("refusal not recorded: %+v", got)
			}
		})
	}
}

func TestGateAuditDownIsUnavailable(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	e.aw.Close()
	status, b := e.post(t, proto.PreToolUsePath, sample(t, "hook-input-PreToolUse-Bash.json"))
	if status != http.StatusServiceUnavailable {
		t.Fatalf("got %d %s, want 503: a decision that cannot be recorded is no decision", status, b)
	}
}

func TestTapIdempotent(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	var in map[string]any
	if err := json.Unmarshal(sample(t, "hook-input-PostToolUse-Bash-with-output.json"), &in); err != nil {
		t.Fatal(err)
	}
	in["tool_response"] = map[string]any{"stdout": "token=" + secret + "\n" + strings.Repeat("x", 5000), "stderr": ""}
	body := mustJSON(t, in)
	for i := range 3 {
		status, b := e.post(t, proto.PostToolUsePath, body)
		var ta TapAnswer
		if status != http.StatusOK || json.Unmarshal(b, &ta) != nil || ta.Duplicate != (i > 0) {
			t.Fatalf("delivery %d: %d %s", i, status, b)
		}
	}
	got := e.entries(t, audit.Filter{Type: "hook", Decision: hookcall.DecisionReported})
	if len(got) != 1 {
		t.Fatalf("%d tap entries after three deliveries, want 1", len(got))
	}
	en := got[0]
	line := string(mustJSON(t, en))
	if strings.Contains(line, secret) || !strings.Contains(line, "[REDACTED]") || strings.Contains(line, strings.Repeat("x", 2000)) {
		t.Fatalf("tap entry not redacted and bounded: %s", line)
	}
	if en.Session != in["session_id"] || en.Detail["tool_use_id"] != in["tool_use_id"] || en.Tool != "Bash" || en.Phase != gateway.PhaseResult || en.Detail["peer"] == nil {
		t.Fatalf("tap entry not linked: %+v", en)
	}

	// A restarted gateway reads the recorded ids back: no second entry.
	hs2, err := New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	e.hs = hs2
	srv2 := agentsock.New(e.gw, agentsock.Options{Logger: quiet})
	hs2.Mount(srv2)
	e.agents.Close()
	e.hc.CloseIdleConnections() // they were to the old server
	if err := srv2.Serve(e.agent, e.sock, e.uid, e.gid); err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	status, b := e.post(t, proto.PostToolUsePath, body)
	if status != http.StatusOK || !strings.Contains(string(b), `"duplicate":true`) {
		t.Fatalf("after restart: %d %s", status, b)
	}
	if n := len(e.entries(t, audit.Filter{Type: "hook", Decision: hookcall.DecisionReported})); n != 1 {
		t.Fatalf("%d tap entries after a restart and redelivery, want 1", n)
	}
}

func TestTapFailureAndBadInput(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	status, b := e.post(t, proto.PostToolUsePath, sample(t, "hook-input-PostToolUseFailure-Bash.json"))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, b)
	}
	got := e.entries(t, audit.Filter{Type: "hook"})
	if len(got) != 1 || !strings.HasPrefix(got[0].Error, "Exit code") || got[0].Detail["is_interrupt"] == nil {
		t.Fatalf("failure entry: %+v", got)
	}
	// Reports the tap cannot take are refused on the record, each answer
	// naming its entry.
	for _, body := range []string{"", "{", string(sample(t, "hook-input-PreToolUse-Bash.json")), `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":[]}`} {
		status, b := e.post(t, proto.PostToolUsePath, []byte(body))
		var ans struct{ Error *api.Error }
		if status != http.StatusBadRequest || json.Unmarshal(b, &ans) != nil || ans.Error == nil || ans.Error.Rule != RuleInput {
			t.Fatalf("tap of %.40q: %d %s, want 400 with rule %s", body, status, b, RuleInput)
		}
		refused := e.entries(t, audit.Filter{ID: ans.Error.ID})
		if len(refused) != 1 || refused[0].Decision != "deny" || refused[0].Agent != "demo" || refused[0].Detail["peer"] == nil {
			t.Fatalf("tap refusal %s recorded as %+v", ans.Error.ID, refused)
		}
	}
}

func TestIngestIdempotent(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "proto", "hooks", "testdata", "claude-code-samples", "stream-json-*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no stream-json samples")
	}
	total := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, err := e.hs.IngestStream("demo", bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		again, err := e.hs.IngestStream("demo", bytes.NewReader(data))
		if err != nil || again.Recorded != 0 || again.Duplicates != first.Recorded+first.Duplicates {
			t.Fatalf("%s: first %+v, again %+v (%v)", f, first, again, err)
		}
		total += first.Recorded
	}
	got := e.entries(t, audit.Filter{Type: string(gateway.KindObserved)})
	if len(got) != total || total == 0 {
		t.Fatalf("%d observed entries, recorded %d", len(got), total)
	}
	for _, en := range got {
		if en.Decision != hookcall.DecisionObserved {
			t.Fatalf("an observation counted as a decision: %+v", en)
		}
	}
	// Through the admin handler, for an agent that does not exist: 404.
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest("POST", "/v1/agents/ghost/observations", strings.NewReader(""))
	req.SetPathValue("agent", "ghost")
	e.hs.Ingest().ServeHTTP(rec, req)
	if rec.status != http.StatusNotFound {
		t.Fatalf("unknown agent: %d", rec.status)
	}
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int)           { r.status = s }

func FuzzGate(f *testing.F) {
	// Compact seeds: every input the fuzzer finds new is minimised first,
	// each try a full gate call, and minimising the 700-byte samples took
	// the whole run. The samples themselves are run by the gate's tests.
	for _, s := range []string{
		`{"hook_event_name":"PreToolUse","session_id":"s","tool_use_id":"t","tool_name":"Bash","tool_input":{"command":"rm -rf /"}}`,
		`{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/etc/x","content":"y"}}`,
		`{"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/etc/shadow"}}`,
		`{"hook_event_name":"PreToolUse","tool_name":"mcp__harness__probe","tool_input":{"name":"forbidden"}}`,
	} {
		f.Add([]byte(s))
	}
	// The audit log on tmpfs: every input is a decision fsync'ed before the
	// answer, and on a disk those fsyncs, not the gate, would set the pace.
	e := newEnvIn(f, testenv.SmallFS(f, testenv.FSTmpfs, 1<<30), "demo", "", "")
	f.Fuzz(func(t *testing.T, body []byte) {
		status, b := e.post(t, proto.PreToolUsePath, body)
		var ga proto.GateAnswer
		if status != http.StatusOK || json.Unmarshal(b, &ga) != nil {
			t.Fatalf("%d %s", status, b)
		}
		if ga.Allow && ga.ID == "" {
			t.Fatal("an allow without an audit id")
		}
	})
}

// TestHookCallsLinkToTheirRun: the gate and tap send the exec and session
// of the run they happen in; their entries carry them (Claude Code's own
// session id kept in detail), and malformed hints are ignored.
func TestHookCallsLinkToTheirRun(t *testing.T) {
	e := newEnv(t, "demo", "", "")
	run, exec := gateway.NewID(), gateway.NewID()
	send := func(path string, body []byte, session, parent string) {
		req, _ := http.NewRequest("POST", "http://toolgate"+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(proto.HeaderSession, session)
		req.Header.Set(proto.HeaderParent, parent)
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	pre := preInput("Bash", "toolu_run1", map[string]any{"command": "ls"})
	send(proto.PreToolUsePath, pre, run, exec)
	post := strings.Replace(string(pre), `"PreToolUse"`, `"PostToolUse","tool_response":{"stdout":"a"}`, 1)
	send(proto.PostToolUsePath, []byte(post), run, exec)
	send(proto.PreToolUsePath, preInput("Bash", "toolu_run2", map[string]any{"command": "ls"}), "../x", "not an id")
	var linked, other int
	for _, en := range e.entries(t, audit.Filter{Type: "hook"}) {
		switch en.Detail["tool_use_id"] {
		case "toolu_run1":
			linked++
			if en.Session != run || en.Parent != exec || en.Detail["claude_session_id"] == nil {
				t.Errorf("%s entry: session %q parent %q detail %v", en.Phase, en.Session, en.Parent, en.Detail)
			}
		case "toolu_run2":
			other++
			if en.Session == "../x" || en.Parent != "" {
				t.Errorf("malformed hints taken: session %q parent %q", en.Session, en.Parent)
			}
		}
	}
	if linked != 3 || other != 2 { // the gate's decision and result, the tap's report
		t.Errorf("%d linked entries (want the gate's two and the tap's), %d others", linked, other)
	}
}
