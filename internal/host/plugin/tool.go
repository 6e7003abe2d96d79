package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/lib/capped"
)

// Defaults for a plugin's limits.
const (
	DefaultTimeout   = 5 * time.Minute
	DefaultMaxOutput = 16 << 20 // per stream
	// ExitTimeout is the exit code of a call that ran out of time (as timeout(1)).
	ExitTimeout = 124
	// defaultWorkspace is the workspace as the sandbox sees it when the agent
	// does not say.
	defaultWorkspace = "/workspace"
)

// Args are the arguments of every plugin tool call.
type Args struct {
	Argv []string `json:"argv"`
	// Cwd is the caller's working directory in the sandbox; default: the
	// workspace root. It must lie inside the workspace.
	Cwd string `json:"cwd,omitempty"`
}

// Output is the result body of a call whose caller gave no streams.
type Output struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Handler runs one allowed call. Its exit code is the tool's; an error means
// the handler could not run (e.g. its binary is missing).
type Handler func(ctx context.Context, inv *Invocation) (exitCode int, err error)

// Invocation is what a Handler gets.
type Invocation struct {
	Call  *gateway.Call // prepared: Argv, Path (the sandbox cwd), ID, Agent, Tool
	Agent gateway.AgentInfo
	Argv  []string
	// Dir is the host working directory for the call, valid until the
	// handler returns. With cwd: workspace it is the sandbox cwd's
	// counterpart in the agent's host workspace, opened so that it cannot
	// be swapped for a symlink leading out of it in between.
	Dir string
	// Stdin is the caller's input; nil when there is none.
	Stdin io.Reader
	// Stdout and Stderr go back to the caller as written: capped, with
	// secret values redacted. Each is for one goroutine at a time.
	Stdout, Stderr io.Writer
	// Secret resolves a secret within the call's (agent, tool) scope.
	Secret func(name string) (string, error)
}

// tool is the gateway.Tool of every kind: argument decoding, cwd checks,
// limits, streams and redaction are the same; only the Handler differs.
type tool struct {
	name      string
	cwd       string // config: "", "workspace" or an absolute host path
	timeout   time.Duration
	maxOutput int64
	secrets   *secrets.Store
	handler   Handler
}

func newTool(name string, p config.Plugin, env Env, h Handler) (*tool, error) {
	switch {
	case p.Timeout < 0:
		return nil, errors.New("timeout: must not be negative")
	case p.MaxOutput < 0:
		return nil, errors.New("maxOutput: must not be negative")
	case p.Cwd != "" && p.Cwd != "workspace" && !path.IsAbs(p.Cwd):
		return nil, fmt.Errorf("cwd: %q is neither \"workspace\" nor an absolute host path", p.Cwd)
	}
	t := &tool{name: name, cwd: p.Cwd, timeout: p.Timeout, maxOutput: p.MaxOutput, secrets: env.Secrets, handler: h}
	if t.timeout == 0 {
		t.timeout = DefaultTimeout
	}
	if t.maxOutput == 0 {
		t.maxOutput = DefaultMaxOutput
	}
	return t, nil
}

func (t *tool) Name() string       { return t.name }
func (t *tool) Kind() gateway.Kind { return gateway.KindTool }

// Prepare decodes the arguments strictly and checks the cwd: inside the
// workspace after resolving "..", and, when mapped to the host, still inside
// the host workspace after following symlinks there.
func (t *tool) Prepare(call *gateway.Call, agent gateway.AgentInfo) error {
	a, err := DecodeArgs(call.Args)
	if err != nil {
		return err
	}
	cwd, rel, err := sandboxCwd(a.Cwd, agent.Workspace)
	if err != nil {
		return err
	}
	if t.cwd == "workspace" {
		f, err := openHostDir(agent.HostDir, rel, cwd)
		if err != nil {
			return err
		}
		f.Close()
	}
	call.Argv, call.Path = a.Argv, cwd
	return nil
}

// DecodeArgs decodes plugin call arguments strictly: unknown fields, wrong
// types, trailing data and NUL bytes are errors.
func DecodeArgs(raw json.RawMessage) (Args, error) {
	var a Args
	if len(bytes.TrimSpace(raw)) == 0 {
		return a, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Args{}, fmt.Errorf("arguments: %v (expected {\"argv\": [strings], \"cwd\": string})", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Args{}, errors.New("arguments: trailing data after the JSON object")
	}
	for i, s := range a.Argv {
		if strings.IndexByte(s, 0) >= 0 {
			return Args{}, fmt.Errorf("argv[%d]: contains a NUL byte", i)
		}
	}
	if strings.IndexByte(a.Cwd, 0) >= 0 {
		return Args{}, errors.New("cwd: contains a NUL byte")
	}
	return a, nil
}

// sandboxCwd resolves cwd lexically and returns it with its path relative
// to the workspace, refusing anything outside.
func sandboxCwd(cwd, workspace string) (clean, rel string, err error) {
	ws := path.Clean(workspace)
	if workspace == "" {
		ws = defaultWorkspace
	}
	if cwd == "" {
		return ws, ".", nil
	}
	if !path.IsAbs(cwd) {
		return "", "", fmt.Errorf("cwd %q: must be an absolute path in the sandbox", cwd)
	}
	clean = path.Clean(cwd)
	switch {
	case clean == ws:
		return clean, ".", nil
	case ws == "/":
		return clean, clean[1:], nil
	case strings.HasPrefix(clean, ws+"/"):
		return clean, clean[len(ws)+1:], nil
	}
	return "", "", fmt.Errorf("cwd %q: outside the workspace %s", cwd, ws)
}

// openHostDir opens rel below the host workspace. os.Root follows symlinks
// only while they stay inside, so a link out of the workspace fails here,
// and the open directory cannot be swapped afterwards. Errors name the
// sandbox path, not the host's.
func openHostDir(hostDir, rel, cwd string) (*os.File, error) {
	if hostDir == "" {
		return nil, errors.New("the agent has no host workspace to map the cwd to")
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return nil, fmt.Errorf("host workspace: %w", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cwd %s: %v", cwd, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("cwd %s: not a directory", cwd)
	}
	return f, nil
}

// Run executes a prepared call with the plugin's timeout. The Result carries
// the exit code (ExitTimeout when time ran out); an error means the handler
// did not run or the caller cancelled. Neither ever shows a secret value.
func (t *tool) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	dir := "/"
	switch {
	case t.cwd == "workspace":
		_, rel, err := sandboxCwd(call.Path, env.Agent.Workspace)
		if err != nil {
			return nil, err
		}
		f, err := openHostDir(env.Agent.HostDir, rel, call.Path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		// The handler runs in the very directory checked above: for a child
		// process the kernel follows this link to the open directory.
		dir = fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	case t.cwd != "":
		dir = t.cwd
	}

	var streams gateway.Streams
	if env.IO != nil {
		streams = *env.IO
	}
	capd := capped.NewStreams(streams.Stdout, streams.Stderr, t.maxOutput)
	// Redact before capping, so a cut can never leave half a secret behind.
	stdout, stderr := t.secrets.NewWriter(capd.Stdout), t.secrets.NewWriter(capd.Stderr)

	tctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	inv := &Invocation{
		Call: call, Agent: env.Agent, Argv: call.Argv, Dir: dir,
		Stdin: streams.Stdin, Stdout: stdout, Stderr: stderr,
		Secret: func(name string) (string, error) { return t.secrets.Resolve(call.Agent, t.name, name) },
	}
	code, herr := t.handler(tctx, inv)
	for _, w := range []io.Writer{stdout, stderr} {
		if r, ok := w.(*secrets.Writer); ok {
			_ = r.Flush() // an error sticks in the capped writer below and is reported there
		}
	}
	capd.Finish()
	if herr != nil {
		return nil, errors.New(t.secrets.Redact(herr.Error()))
	}

	res := &gateway.Result{}
	var problems []string
	if tctx.Err() != nil && ctx.Err() == nil {
		code = ExitTimeout
		problems = append(problems, fmt.Sprintf("timed out after %s; process tree killed", t.timeout))
	}
	res.ExitCode = &code
	if err := capd.Err(); err != nil {
		problems = append(problems, fmt.Sprintf("output stream failed: %v", err))
	}
	res.Error = t.secrets.Redact(strings.Join(problems, "; "))
	if out, errOut, kept := capd.Kept(); kept {
		res.Output = &Output{Stdout: out, Stderr: errOut, Truncated: capd.Truncated()}
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("cancelled: %w", context.Cause(ctx))
	}
	return res, nil
}
