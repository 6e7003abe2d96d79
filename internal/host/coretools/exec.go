package coretools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"maps"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/lib/capped"
)

// Exec is the `exec` core tool: run a command or an argv in the sandbox,
// stdout and stderr kept apart, each capped at MaxOutput with a visible
// marker, killed (the whole process tree) at the timeout.
type Exec struct{ *shared }

type execArgs struct {
	Command *string           `json:"command"`
	Argv    []string          `json:"argv"`
	Cwd     string            `json:"cwd"`
	Env     map[string]string `json:"env"`
	// SecretEnv names host secrets to put in the environment, by variable.
	SecretEnv map[string]string `json:"secretEnv"`
	Stdin     *string           `json:"stdin"`
	Timeout   json.RawMessage   `json:"timeout"`
}

// ExecOutput is the result body of `exec`. When the call streams its output
// to the caller, Stdout and Stderr are empty here.
type ExecOutput struct {
	ExitCode  int    `json:"exitCode"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timedOut"`
	Truncated bool   `json:"truncated"`
}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

func (*Exec) Name() string       { return "exec" }
func (*Exec) Kind() gateway.Kind { return gateway.KindCore }

// parse checks the arguments and returns the timeout to use, capped by the
// agent's ExecTimeout.
func (t *Exec) parse(raw json.RawMessage, agent string) (*execArgs, time.Duration, error) {
	var a execArgs
	if err := decodeArgs("exec", raw, &a); err != nil {
		return nil, 0, err
	}
	switch {
	case a.Command != nil && a.Argv != nil:
		return nil, 0, fmt.Errorf("exec: give command or argv, not both")
	case a.Command == nil && a.Argv == nil:
		return nil, 0, fmt.Errorf("exec: command (a shell string) or argv (an array) is required")
	case a.Command != nil && strings.TrimSpace(*a.Command) == "":
		return nil, 0, fmt.Errorf("exec: command is empty")
	case a.Command != nil && strings.IndexByte(*a.Command, 0) >= 0:
		return nil, 0, fmt.Errorf("exec: command contains a NUL byte")
	case a.Argv != nil && (len(a.Argv) == 0 || a.Argv[0] == ""):
		return nil, 0, fmt.Errorf("exec: argv must start with a program name")
	}
	for i, s := range a.Argv {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, 0, fmt.Errorf("exec: argv[%d] contains a NUL byte", i)
		}
	}
	for k, v := range a.Env {
		if !envName().MatchString(k) {
			return nil, 0, fmt.Errorf("exec: env name %q is not valid (letters, digits and _, not starting with a digit)", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, 0, fmt.Errorf("exec: env %s contains a NUL byte", k)
		}
	}
	for k, name := range a.SecretEnv {
		switch _, dup := a.Env[k]; {
		case !envName().MatchString(k):
			return nil, 0, fmt.Errorf("exec: secretEnv name %q is not valid (letters, digits and _, not starting with a digit)", k)
		case name == "":
			return nil, 0, fmt.Errorf("exec: secretEnv %s names no secret", k)
		case dup:
			return nil, 0, fmt.Errorf("exec: %s is in both env and secretEnv", k)
		}
	}
	ceiling := t.limitsOf(agent).ExecTimeout
	timeout, err := parseTimeout(a.Timeout, ceiling)
	if err != nil {
		return nil, 0, fmt.Errorf("exec: %w", err)
	}
	return &a, timeout, nil
}

// parseTimeout accepts a Go duration string ("90s", "2m") or a number of
// seconds; absent means the ceiling, more than the ceiling is capped.
func parseTimeout(raw json.RawMessage, ceiling time.Duration) (time.Duration, error) {
	if isNull(raw) {
		return ceiling, nil
	}
	var d time.Duration
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("timeout: %v", err)
		}
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("timeout %q is neither a duration (e.g. \"30s\", \"2m\") nor a number of seconds", s)
		}
	} else {
		var secs float64
		if err := json.Unmarshal(raw, &secs); err != nil {
			return 0, fmt.Errorf("timeout: want a duration string or a number of seconds, got %s", clip(string(raw)))
		}
		if secs >= ceiling.Seconds() { // also keeps the conversion below from overflowing
			return ceiling, nil
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return 0, fmt.Errorf("timeout must be positive, got %s", raw)
	}
	return min(d, ceiling), nil
}

func (t *Exec) Prepare(call *gateway.Call, agent gateway.AgentInfo) error {
	a, _, err := t.parse(call.Args, call.Agent)
	if err != nil {
		return err
	}
	if len(a.SecretEnv) > 0 && call.Via != gateway.ViaAdmin {
		// A sandbox asking for the host's secrets in its own environment
		// would undo keeping them on the host.
		return fmt.Errorf("exec: secretEnv is for the operator's calls on the host (toolgate run/exec --secret-env), not from %s", call.Via)
	}
	cwd := a.Cwd
	if cwd == "" {
		cwd = "."
	}
	if call.Path, err = resolvePath("cwd", cwd, agent); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	if a.Command != nil {
		call.Command = *a.Command
		call.Argv = []string{"/bin/sh", "-c", *a.Command}
	} else {
		call.Command = ""
		call.Argv = a.Argv
	}
	return nil
}

func (t *Exec) Run(ctx context.Context, call *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	a, timeout, err := t.parse(call.Args, call.Agent)
	if err != nil {
		return nil, err
	}
	if call.Path == "" || len(call.Argv) == 0 {
		return nil, errNotPrepared
	}
	if env.Sandbox == nil {
		return nil, errNoSandbox
	}
	spec := &gateway.ExecSpec{
		Argv:    call.Argv,
		Cwd:     call.Path,
		Timeout: timeout,
		CallID:  call.ID,
		Session: call.Session,
	}
	for k, v := range a.Env {
		spec.Env = append(spec.Env, k+"="+v)
	}
	for k, name := range a.SecretEnv {
		if t.secrets == nil {
			return nil, fmt.Errorf("exec: secretEnv %s: this gateway has no secrets", k)
		}
		v, err := t.secrets.Resolve(call.Agent, "exec", name)
		if err != nil {
			return nil, fmt.Errorf("exec: secretEnv %s: %w", k, err)
		}
		spec.Env = append(spec.Env, k+"="+v)
	}
	var callerOut, callerErr io.Writer
	if env.IO != nil {
		callerOut, callerErr = env.IO.Stdout, env.IO.Stderr
	}
	streams := capped.NewStreams(callerOut, callerErr, t.limitsOf(call.Agent).MaxOutput)
	spec.Stdout, spec.Stderr = streams.Stdout, streams.Stderr
	var streamed *countWriter // a streamed stdin's bytes, counted and hashed
	var stdinSum hash.Hash
	switch {
	case a.Stdin != nil:
		spec.Stdin = strings.NewReader(*a.Stdin)
	case env.IO != nil && env.IO.Stdin != nil:
		stdinSum = sha256.New()
		streamed = &countWriter{w: stdinSum}
		spec.Stdin = io.TeeReader(env.IO.Stdin, streamed)
	}
	oc, err := env.Sandbox.Exec(ctx, spec)
	if streamed != nil {
		// The record says what the command was given: how many bytes, which.
		d := resultDetail(call)
		d["stdinBytes"], d["stdinSha256"] = streamed.n, hex.EncodeToString(stdinSum.Sum(nil))
	}
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	if oc.Queued >= time.Millisecond {
		resultDetail(call)["queuedMs"] = oc.Queued.Milliseconds()
	}
	streams.Finish()
	stdout, stderr, _ := streams.Kept()
	out := &ExecOutput{
		ExitCode:  oc.ExitCode,
		Stdout:    stdout,
		Stderr:    stderr,
		TimedOut:  oc.TimedOut,
		Truncated: streams.Truncated(),
	}
	res := &gateway.Result{ExitCode: &out.ExitCode, Output: out}
	var problems []string
	if oc.TimedOut {
		problems = append(problems, fmt.Sprintf("timed out after %s", timeout))
	}
	if err := streams.Err(); err != nil {
		problems = append(problems, fmt.Sprintf("output stream failed: %v", err))
	}
	res.Error = strings.Join(problems, "; ")
	return res, nil
}

// resultDetail is the detail the call's result entry will carry, to add
// to: a copy, since the decision entry, already written, keeps the one it
// had (and knew no digest, no byte count, no wait).
func resultDetail(call *gateway.Call) map[string]any {
	call.Detail = maps.Clone(call.Detail)
	if call.Detail == nil {
		call.Detail = map[string]any{}
	}
	return call.Detail
}

// AuditArgs keeps the size of stdin, never its content.
func (*Exec) AuditArgs(call *gateway.Call) json.RawMessage {
	return auditSized(call.Args, stringSize, "stdin")
}
