// Package gatewaytest holds the fakes a reader needs to understand a door
// or a tool without Docker: an audit sink in memory, a sandbox whose files
// are in memory and whose execs a function answers, a tool that counts its
// runs, a policy that is a function, and New, a gateway on them.
package gatewaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Sink is an in-memory gateway.AuditSink.
type Sink struct {
	mu      sync.Mutex
	entries []*gateway.Entry
	fail    error
}

// Append keeps e, or fails with the error Fail set.
func (s *Sink) Append(e *gateway.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.entries = append(s.entries, e)
	return nil
}

// Fail makes every later Append fail with err (nil: succeed again): the
// audit log unavailable, so the gateway must refuse every call.
func (s *Sink) Fail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// Entries are the entries appended so far, in order.
func (s *Sink) Entries() []*gateway.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// Of are the entries of call id, in order (decision, then result).
func (s *Sink) Of(id string) []*gateway.Entry {
	var out []*gateway.Entry
	for _, e := range s.Entries() {
		if e.ID == id {
			out = append(out, e)
		}
	}
	return out
}

// Sandbox is a gateway.Sandbox (and gateway.Sandboxes: every agent gets
// the same one) whose files are in memory and whose execs Run answers.
type Sandbox struct {
	// Run answers an exec; nil: it writes its argv, joined by spaces and
	// ended by a newline, to stdout and exits 0.
	Run func(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error)

	mu    sync.Mutex
	files map[string][]byte
	execs []*gateway.ExecSpec
}

// Sandbox implements gateway.Sandboxes.
func (s *Sandbox) Sandbox(context.Context, string) (gateway.Sandbox, error) { return s, nil }

// Exec records spec and answers it with Run.
func (s *Sandbox) Exec(ctx context.Context, spec *gateway.ExecSpec) (*gateway.ExecOutcome, error) {
	s.mu.Lock()
	s.execs = append(s.execs, spec)
	run := s.Run
	s.mu.Unlock()
	if run != nil {
		return run(ctx, spec)
	}
	stdout, _ := spec.Outputs()
	_, _ = stdout.Write([]byte(strings.Join(spec.Argv, " ") + "\n"))
	return &gateway.ExecOutcome{}, nil
}

// Execs are the execs asked so far.
func (s *Sandbox) Execs() []*gateway.ExecSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.execs)
}

// ReadFile reads a file written before (fs.ErrNotExist otherwise).
func (s *Sandbox) ReadFile(_ context.Context, p string, limit int64) (*gateway.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[p]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return &gateway.File{Path: p, Size: int64(len(b)), Mode: 0o644, Data: b[:min(int64(len(b)), limit)]}, nil
}

// WriteFile keeps a copy of data at p.
func (s *Sandbox) WriteFile(_ context.Context, p string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[string][]byte{}
	}
	s.files[p] = slices.Clone(data)
	return nil
}

// Tool is a gateway.Tool of kind tool that counts its runs. Its Prepare
// refuses arguments that are not a JSON object, and puts the object's
// "argv" (a list of strings), when there is one, into Call.Argv for
// policy; its Run answers Output.
type Tool struct {
	ToolName string // "fake" when empty
	Output   string

	mu   sync.Mutex
	runs int
}

func (t *Tool) Name() string {
	if t.ToolName == "" {
		return "fake"
	}
	return t.ToolName
}

func (t *Tool) Kind() gateway.Kind { return gateway.KindTool }

func (t *Tool) Prepare(call *gateway.Call, _ gateway.AgentInfo) error {
	var a struct {
		Argv []string `json:"argv"`
	}
	if len(call.Args) > 0 {
		if err := json.Unmarshal(call.Args, &a); err != nil {
			return err
		}
	}
	call.Argv = a.Argv
	return nil
}

func (t *Tool) Run(context.Context, *gateway.Call, *gateway.RunEnv) (*gateway.Result, error) {
	t.mu.Lock()
	t.runs++
	t.mu.Unlock()
	code := 0
	return &gateway.Result{ExitCode: &code, Output: t.Output}, nil
}

// Runs is how often Run was called: what a denied call must leave at 0.
func (t *Tool) Runs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs
}

// Decide is a gateway.Decider that is a function.
type Decide func(call *gateway.Call) gateway.Decision

func (d Decide) Decide(call *gateway.Call) gateway.Decision { return d(call) }

// AllowAll allows every call, by rule "test".
var AllowAll = Decide(func(*gateway.Call) gateway.Decision {
	return gateway.Decision{Allow: true, Rule: "test", Reason: "allowed by the test"}
})

// Options shape New's gateway; every part not given is one of this
// package's.
type Options struct {
	Agents  []string // "demo" when empty
	Tools   []gateway.Tool
	Decider gateway.Decider // AllowAll when nil
	Sink    *Sink
	Sandbox *Sandbox
}

// Gateway is New's gateway with the parts it runs on.
type Gateway struct {
	*gateway.Gateway
	Sink    *Sink
	Sandbox *Sandbox
}

// New is a gateway over o's parts: the real pipeline, nothing real
// beneath it. Two tools of one name are a mistake in the test: it panics.
func New(o Options) *Gateway {
	if len(o.Agents) == 0 {
		o.Agents = []string{"demo"}
	}
	if o.Decider == nil {
		o.Decider = AllowAll
	}
	if o.Sink == nil {
		o.Sink = &Sink{}
	}
	if o.Sandbox == nil {
		o.Sandbox = &Sandbox{}
	}
	snap := &gateway.Snapshot{Agents: map[string]gateway.AgentInfo{}, Tools: map[string]gateway.Tool{}, Decider: o.Decider}
	for _, a := range o.Agents {
		snap.Agents[a] = gateway.AgentInfo{Name: a}
	}
	for _, tool := range o.Tools {
		if _, dup := snap.Tools[tool.Name()]; dup {
			panic(fmt.Sprintf("gatewaytest: two tools named %q", tool.Name()))
		}
		snap.Tools[tool.Name()] = tool
	}
	return &Gateway{
		Gateway: gateway.New(gateway.Options{Audit: o.Sink, Sandboxes: o.Sandbox}, snap),
		Sink:    o.Sink,
		Sandbox: o.Sandbox,
	}
}
