package gateway

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/toolgate/toolgate/internal/proto/api"
)

// Decider is policy: it decides one prepared call. It must not block on I/O.
type Decider interface {
	Decide(call *Call) Decision
}

// AuditSink appends entries durably. Append returns only once the entry is
// on stable storage; an error means the entry was not recorded.
type AuditSink interface {
	Append(e *Entry) error
}

// AuditQueue is implemented by sinks that can take an entry without the
// caller waiting for it to be durable; see Options.AsyncResults.
type AuditQueue interface {
	Enqueue(e *Entry)
}

// Tool is anything the gateway can run: a core tool, a plugin handler.
// Adding a tool is implementing this and registering it; the pipeline never
// switches on tool names.
type Tool interface {
	Name() string
	Kind() Kind
	// Prepare validates the arguments and fills the call's policy facts
	// (Path, Argv …). An error is a bad request: the call is denied and recorded.
	Prepare(call *Call, agent AgentInfo) error
	// Run executes an allowed call. Output may stream to io; the Result
	// carries what the caller gets back when it is not streamed.
	Run(ctx context.Context, call *Call, env *RunEnv) (*Result, error)
}

// Admitter is a tool whose availability depends on something outside the
// gateway: an upstream MCP server's live tool definition against the one
// approved. Handle asks it once policy has allowed a call and before the
// decision is recorded, so the record says why a call did not run; a
// non-nil Refusal denies the call under the refusal's rule.
type Admitter interface {
	Admit(ctx context.Context, call *Call) *Refusal
}

// Refusal is a tool refusing a call under a rule of its own. Returned by
// Prepare (as an error) it is recorded under that rule, not as bad arguments.
type Refusal struct {
	Rule   string
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// AuditArgs is implemented by tools whose arguments carry bodies that the
// audit log must keep only as sizes (file contents, stdin). It gets the call
// as Prepare left it (Prepared may be nil when Prepare refused the call).
type AuditArgs interface {
	AuditArgs(call *Call) json.RawMessage
}

// InputHolder is a tool whose call carries, beyond its arguments, bytes in
// hand that it will use (a model request's body). A person asked about the
// call is shown them and an approval binds them, as it does a streamed
// input, which the gateway reads whole first (Call.Input).
type InputHolder interface {
	HeldInput(call *Call) []byte
}

// AgentInfo is what tools need to know about the calling agent.
type AgentInfo struct {
	Name      string
	Workspace string // the workspace as the sandbox sees it, e.g. /workspace
	HostDir   string // the workspace directory on the host
	// AskTimeout bounds how long a call a rule sends to a person waits;
	// zero is the approver's default.
	AskTimeout time.Duration
}

// Approver holds a call that a rule sent to a person until one answers.
// Await returns the answer, or a denial when time runs out, ctx ends or the
// gateway shuts down; it never blocks past timeout or ctx's deadline.
type Approver interface {
	Await(ctx context.Context, call *Call, dec Decision, timeout time.Duration) Approval
}

// Limiter counts allowed calls against rate limits and budgets. Admit
// returns done, to call when the call has ended, or the denial of a call
// over a limit (then nothing was counted).
type Limiter interface {
	Admit(call *Call) (done func(), denial *Decision)
}

// Approval is how a call that waited for a person ended.
type Approval struct {
	Allow   bool          `json:"-"`
	Outcome string        `json:"outcome"` // approved, denied, standing, timeout, cancelled, shutdown, refused
	By      string        `json:"by,omitempty"`
	At      time.Time     `json:"at"`
	Waited  time.Duration `json:"-"`
	Reason  string        `json:"-"`
	// Raise is a person's new caps for the call's task (session.budget's
	// form: cost=4,calls=1000), given with an approval.
	Raise string `json:"raise,omitempty"`
}

// RunEnv is what a running tool may use.
type RunEnv struct {
	Agent   AgentInfo
	Sandbox Sandbox  // nil for tools that do not touch the sandbox
	IO      *Streams // nil when the caller wants a buffered result
}

// Streams connects a call to its caller while it runs.
type Streams struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Result is what a finished call returns (api.Result: the admin API's).
type Result = api.Result

// Sandbox is one agent's isolated environment, as the core tools need it.
type Sandbox interface {
	// Exec runs argv inside the sandbox. It never goes through a shell
	// unless argv names one.
	Exec(ctx context.Context, spec *ExecSpec) (*ExecOutcome, error)
	// ReadFile returns at most limit bytes of the file at an absolute path
	// as the sandbox sees it; symlinks resolve inside the sandbox.
	ReadFile(ctx context.Context, path string, limit int64) (*File, error)
	// WriteFile atomically replaces the file at an absolute sandbox path,
	// creating parent directories.
	WriteFile(ctx context.Context, path string, data []byte) error
}

// StreamWriter is a Sandbox that replaces a file from a stream without
// holding it: the content is r's first size bytes, which must be all of r.
// It hashes them as they pass and returns their SHA-256; the file is
// replaced only when exactly those bytes arrived whole (and, with want, they
// have that digest). A Sandbox without it gets the content buffered through
// WriteFile.
type StreamWriter interface {
	WriteFileFrom(ctx context.Context, path string, r io.Reader, size int64, want *[32]byte) (sha256 [32]byte, err error)
}

// StreamReader is a Sandbox that streams a file to w without holding it:
// check sees the file's size and mode (File without Data) before any byte
// is written and refuses the read by returning an error; at most limit
// bytes (limit < 0: all) follow.
type StreamReader interface {
	ReadFileTo(ctx context.Context, path string, limit int64, check func(*File) error, w io.Writer) (*File, error)
}

// ExecSpec describes one process to run in a sandbox.
type ExecSpec struct {
	Argv    []string
	Cwd     string
	Env     []string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Timeout time.Duration // kills the whole process tree when reached
	CallID  string        // exported to the process as TOOLGATE_CALL_ID
	Session string        // the call's session hint, exported as TOOLGATE_SESSION
}

// Outputs are where the process's stdout and stderr go: a nil writer
// discards its stream.
func (s *ExecSpec) Outputs() (stdout, stderr io.Writer) {
	return orDiscard(s.Stdout), orDiscard(s.Stderr)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// ExecOutcome is how a sandbox process ended.
type ExecOutcome struct {
	ExitCode int
	TimedOut bool
	Queued   time.Duration // how long the call waited for its turn in the sandbox
}

// File is a file read from a sandbox.
type File struct {
	Path string
	Size int64 // full size on disk; Data may be shorter when limited
	Mode uint32
	Data []byte
}

// Sandboxes gives the sandbox of an agent, creating or restarting it when needed.
type Sandboxes interface {
	Sandbox(ctx context.Context, agent string) (Sandbox, error)
}

// Observer is told how each call went, after it ends: the metrics, the
// traces. It must not block; it is called on the caller's path.
type Observer interface {
	ObserveCall(c CallStats)
}

// CallStarter is an Observer that is also told when a call begins, before
// its decision: a tracer places the calls made while one runs (an exec's
// plugin calls and egress) beneath it. Only the fields known then are set
// (ID, Agent, Kind, Tool as asked, Parent, Session, Via, Start).
type CallStarter interface {
	Observer
	StartCall(c CallStats)
}

// Observers tells each of several observers, in order.
type Observers []Observer

// ObserveCall implements Observer.
func (obs Observers) ObserveCall(c CallStats) {
	for _, o := range obs {
		o.ObserveCall(c)
	}
}

// StartCall implements CallStarter for those of them that are one.
func (obs Observers) StartCall(c CallStats) {
	for _, o := range obs {
		if s, ok := o.(CallStarter); ok {
			s.StartCall(c)
		}
	}
}

// CallStats describes one finished call for an Observer.
type CallStats struct {
	ID       string // the audit id
	Agent    string
	Kind     Kind
	Tool     string // "" when the call was refused before its tool was known
	Parent   string // the caller's correlation hints, as recorded
	Session  string
	Via      string
	Decision string         // allow, deny
	Start    time.Time      // the call reached the gateway
	Decide   time.Duration  // prepare, policy, approval wait
	Record   time.Duration  // the decision entry made durable
	Execute  time.Duration  // the tool ran (0 when denied)
	Failed   bool           // ran and failed (an error, not an exit code)
	Detail   map[string]any // the call's detail (after it ran: egress bytes, model usage …)
}
