package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/gateway/gatewaytest"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/lib/capped"
)

const token = "s3cr3t-T0KEN-value-42"

// entriesJSON is every entry the sink holds, as JSON: where a leaked
// secret would show.
func entriesJSON(t *testing.T, s *gatewaytest.Sink) string {
	b, err := json.Marshal(s.Entries())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// harness runs plugin tools through the real pipeline, as the socket will.
type harness struct {
	gw      *gateway.Gateway
	audit   *gatewaytest.Sink
	hostDir string
}

func newHarness(t *testing.T, plugins map[string]config.Plugin, defs map[string]config.Secret) *harness {
	t.Helper()
	store, err := secrets.New(t.TempDir(), defs)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := Build(&config.Config{Plugins: plugins}, Env{Secrets: store})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{audit: &gatewaytest.Sink{}, hostDir: t.TempDir()}
	agents := map[string]gateway.AgentInfo{}
	for _, a := range []string{"demo", "other"} {
		agents[a] = gateway.AgentInfo{Name: a, Workspace: "/workspace", HostDir: h.hostDir}
	}
	h.gw = gateway.New(gateway.Options{Audit: h.audit}, &gateway.Snapshot{Agents: agents, Tools: tools, Decider: gatewaytest.AllowAll})
	return h
}

type outcome struct {
	res            *gateway.Result
	err            error
	stdout, stderr string
}

func (h *harness) call(ctx context.Context, agent, tool string, args any, stdin string) outcome {
	raw, _ := json.Marshal(args)
	var out, errb bytes.Buffer
	io := &gateway.Streams{Stdout: &out, Stderr: &errb}
	if stdin != "" {
		io.Stdin = strings.NewReader(stdin)
	}
	res, err := h.gw.Handle(ctx, &gateway.Call{Agent: agent, Kind: gateway.KindTool, Tool: tool, Args: raw, Via: "test"}, io)
	return outcome{res: res, err: err, stdout: out.String(), stderr: errb.String()}
}

func exitOf(t *testing.T, o outcome) int {
	t.Helper()
	if o.err != nil {
		t.Fatalf("call failed: %v", o.err)
	}
	if o.res == nil || o.res.ExitCode == nil {
		t.Fatalf("no exit code in %+v", o.res)
	}
	return *o.res.ExitCode
}

func argv(a ...string) map[string]any { return map[string]any{"argv": a} }

var tokenDefs = map[string]config.Secret{
	"tok": {Value: token, Agents: []string{"demo"}, Tools: []string{"hash", "env"}},
}

func TestSecretReachesHandlerEnvOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]config.Plugin{
		"hash": {Kind: "command", Command: "/bin/sh", Args: []string{"-c", `printf %s "$TOKEN" | sha256sum`}, Env: map[string]string{"TOKEN": "{{secret:tok}}"}},
		"env":  {Kind: "command", Command: "/usr/bin/env", Env: map[string]string{"TOKEN": "Bearer {{secret:tok}}", "PLAIN": "x"}},
	}, tokenDefs)

	o := h.call(context.Background(), "demo", "hash", argv(), "")
	sum := sha256.Sum256([]byte(token))
	if code := exitOf(t, o); code != 0 || !strings.HasPrefix(o.stdout, hex.EncodeToString(sum[:])) {
		t.Fatalf("exit %d, stdout %q: the handler did not get the secret", code, o.stdout)
	}

	// The environment is exactly the defaults and the plugin's env; the
	// secret's value never comes back to the caller.
	o = h.call(context.Background(), "demo", "env", argv(), "")
	exitOf(t, o)
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(o.stdout), "\n") {
		k, _, _ := strings.Cut(line, "=")
		keys = append(keys, k)
	}
	if got := strings.Join(keys, ","); got != "HOME,LANG,PATH,PLAIN,TOKEN" {
		t.Errorf("handler env keys = %s", got)
	}
	if !strings.Contains(o.stdout, "TOKEN=Bearer "+secrets.Redacted) || strings.Contains(o.stdout, token) {
		t.Errorf("stdout not redacted: %q", o.stdout)
	}
	if strings.Contains(entriesJSON(t, h.audit), token) {
		t.Error("secret value in the audit entries")
	}
}

func TestSecretScope(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]config.Plugin{
		"hash":  {Kind: "command", Command: "/bin/sh", Args: []string{"-c", `printf %s "$TOKEN"`}, Env: map[string]string{"TOKEN": "{{secret:tok}}"}},
		"other": {Kind: "command", Command: "/bin/sh", Args: []string{"-c", `printf %s "$TOKEN"`}, Env: map[string]string{"TOKEN": "{{secret:tok}}"}},
	}, tokenDefs)
	for _, tc := range []struct{ agent, tool string }{
		{"other", "hash"}, // agent not granted
		{"demo", "other"}, // tool not granted
	} {
		o := h.call(context.Background(), tc.agent, tc.tool, argv(), "")
		if o.err == nil || !strings.Contains(o.err.Error(), `secret "tok" is not available`) {
			t.Errorf("%s/%s: err = %v, want a scope error", tc.agent, tc.tool, o.err)
		}
		if strings.Contains(o.stdout, token) || (o.err != nil && strings.Contains(o.err.Error(), token)) {
			t.Errorf("%s/%s: secret leaked", tc.agent, tc.tool)
		}
	}
	if strings.Contains(entriesJSON(t, h.audit), token) {
		t.Error("secret value in the audit entries")
	}
}

func TestErrorsAreRedacted(t *testing.T) {
	t.Parallel()
	// A secret that happens to be part of what an error shows (here: the
	// missing binary's path) is redacted from the error and the audit.
	missing := "/nonexistent/" + token
	h := newHarness(t, map[string]config.Plugin{
		"leak": {Kind: "command", Command: missing},
	}, map[string]config.Secret{"p": {Value: missing}})
	o := h.call(context.Background(), "demo", "leak", argv("x"), "")
	if o.err == nil || !strings.Contains(o.err.Error(), secrets.Redacted) {
		t.Fatalf("err = %v, want a redacted start error", o.err)
	}
	for what, s := range map[string]string{"error": o.err.Error(), "audit": entriesJSON(t, h.audit)} {
		if strings.Contains(s, token) {
			t.Errorf("secret in the %s: %s", what, s)
		}
	}
}

func TestArgvIsLiteral(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]config.Plugin{
		"printf": {Kind: "command", Command: "/usr/bin/printf", Args: []string{"[%s]"}, Cwd: "workspace"},
	}, nil)
	args := []string{`"double" 'single'`, "new\nline", "$(touch pwned)", "a; touch pwned2", "`id`", "*", "$HOME", ""}
	o := h.call(context.Background(), "demo", "printf", argv(args...), "")
	if code := exitOf(t, o); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, o.stderr)
	}
	want := ""
	for _, a := range args {
		want += "[" + a + "]"
	}
	if o.stdout != want {
		t.Errorf("stdout = %q, want %q", o.stdout, want)
	}
	for _, f := range []string{"pwned", "pwned2"} {
		if _, err := os.Stat(filepath.Join(h.hostDir, f)); err == nil {
			t.Errorf("%s exists: argv went through a shell", f)
		}
	}
}

func TestStdinStreams(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]config.Plugin{
		"cat":  {Kind: "command", Command: "/bin/cat"},
		"echo": {Kind: "builtin", Builtin: "toolgate-echo"},
	}, nil)
	o := h.call(context.Background(), "demo", "cat", argv(), "from stdin\n")
	if exitOf(t, o) != 0 || o.stdout != "from stdin\n" {
		t.Errorf("cat: %q", o.stdout)
	}
	o = h.call(context.Background(), "demo", "echo", argv("a", "-", "b"), "in")
	if exitOf(t, o) != 0 || o.stdout != "a - b\nin" {
		t.Errorf("echo: %q", o.stdout)
	}
}

func TestExitCodeAndBufferedOutput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]config.Plugin{
		"sh": {Kind: "command", Command: "/bin/sh", Args: []string{"-c", `echo out; echo err >&2; exit 3`}},
	}, nil)
	call := &gateway.Call{Agent: "demo", Tool: "sh", Args: json.RawMessage(`{"argv":[]}`)}
	res, err := h.gw.Handle(context.Background(), call, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.Output.(*Output)
	if *res.ExitCode != 3 || out == nil || out.Stdout != "out\n" || out.Stderr != "err\n" {
		t.Errorf("exit %d, output %+v", *res.ExitCode, out)
	}
}

// waitPid returns the pid a handler wrote to file, waiting for the file.
func waitPid(t *testing.T, file string) int {
	t.Helper()
	for range 1000 {
		if b, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("handler never wrote its pid file")
	return 0
}

// assertDies waits for pid to be gone (or a zombie awaiting its reaper).
func assertDies(t *testing.T, pid int) {
	t.Helper()
	for range 1000 {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("child %d survived its call", pid)
}

// hanger starts a background child, records its pid and waits forever.
func hanger(pidFile string, timeout time.Duration) config.Plugin {
	return config.Plugin{
		Kind: "command", Command: "/bin/sh", Timeout: timeout,
		Args: []string{"-c", `sleep 1000 & echo $! > "$PIDFILE"; wait`},
		Env:  map[string]string{"PIDFILE": pidFile},
	}
}

func TestTimeoutKillsProcessTree(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	h := newHarness(t, map[string]config.Plugin{"hang": hanger(pidFile, 300*time.Millisecond)}, nil)
	o := h.call(context.Background(), "demo", "hang", argv(), "")
	if code := exitOf(t, o); code != ExitTimeout || !strings.Contains(o.res.Error, "timed out after 300ms") {
		t.Errorf("exit %d, error %q", code, o.res.Error)
	}
	assertDies(t, waitPid(t, pidFile))
}

func TestCancelKillsProcessTree(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	h := newHarness(t, map[string]config.Plugin{"hang": hanger(pidFile, 0)}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outcome)
	go func() { done <- h.call(ctx, "demo", "hang", argv(), "") }()
	pid := waitPid(t, pidFile)
	cancel()
	o := <-done
	if o.err == nil || !strings.Contains(o.err.Error(), "cancelled") {
		t.Errorf("err = %v, want cancelled", o.err)
	}
	assertDies(t, pid)
}

func TestBackgroundChildDiesWithCall(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	h := newHarness(t, map[string]config.Plugin{"bg": {
		Kind: "command", Command: "/bin/sh",
		Args: []string{"-c", `sleep 1000 >/dev/null 2>&1 & echo $! > "$PIDFILE"`},
		Env:  map[string]string{"PIDFILE": pidFile},
	}}, nil)
	if code := exitOf(t, h.call(context.Background(), "demo", "bg", argv(), "")); code != 0 {
		t.Fatalf("exit %d", code)
	}
	assertDies(t, waitPid(t, pidFile))
}

type countWriter struct {
	n    int64
	tail []byte
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	c.tail = append(c.tail, p...)
	if len(c.tail) > 256 {
		c.tail = c.tail[len(c.tail)-256:]
	}
	return len(p), nil
}

func TestOutputCapped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]config.Plugin{
		"flood": {Kind: "command", Command: "/usr/bin/head", Args: []string{"-c", "104857600", "/dev/zero"}},
	}, nil)
	var out countWriter
	res, err := h.gw.Handle(context.Background(), &gateway.Call{Agent: "demo", Tool: "flood"},
		&gateway.Streams{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf(capped.Marker, 100<<20-DefaultMaxOutput)
	if *res.ExitCode != 0 {
		t.Errorf("exit %d: the pipe stopped draining at the cap", *res.ExitCode)
	}
	if out.n != DefaultMaxOutput+int64(len(marker)) || !strings.HasSuffix(string(out.tail), marker) {
		t.Errorf("got %d bytes ending %q, want %d + marker %q", out.n, out.tail, DefaultMaxOutput, marker)
	}
	if !strings.Contains(marker, "…[toolgate: output truncated, 88080384 bytes dropped]") {
		t.Errorf("marker %q", marker)
	}
}

func TestCwd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]config.Plugin{
		"pwd":   {Kind: "command", Command: "/bin/pwd", Cwd: "workspace"},
		"fixed": {Kind: "command", Command: "/bin/pwd", Cwd: "/"},
	}, nil)
	outside := t.TempDir()
	for _, d := range []string{"sub/deep", "real"} {
		if err := os.MkdirAll(filepath.Join(h.hostDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"escape": outside, "sub/up": "../..", "inside": "real", "sub/abs": "/etc"} {
		if err := os.Symlink(target, filepath.Join(h.hostDir, link)); err != nil {
			t.Fatal(err)
		}
	}
	real := func(p string) string {
		r, err := filepath.EvalSymlinks(filepath.Join(h.hostDir, p))
		if err != nil {
			t.Fatal(err)
		}
		return r + "\n"
	}
	for _, tc := range []struct {
		tool, cwd string
		want      string // stdout; empty: refused with refusal
		refusal   string
	}{
		{"pwd", "", real("."), ""},
		{"pwd", "/workspace", real("."), ""},
		{"pwd", "/workspace/sub/deep", real("sub/deep"), ""},
		{"pwd", "/workspace/sub/deep/../..//sub/", real("sub"), ""},
		{"pwd", "/workspace/inside", real("real"), ""},
		{"fixed", "/workspace/sub", "/\n", ""},
		{"pwd", "/etc", "", "outside the workspace"},
		{"pwd", "/workspace/../etc", "", "outside the workspace"},
		{"pwd", "/workspacex", "", "outside the workspace"},
		{"pwd", "sub", "", "must be an absolute path"},
		{"pwd", "/workspace/escape", "", "escapes"},
		{"pwd", "/workspace/sub/up", "", "escapes"},
		{"pwd", "/workspace/sub/abs", "", "escapes"},
		{"pwd", "/workspace/missing", "", "no such file"},
		{"fixed", "/tmp", "", "outside the workspace"},
	} {
		o := h.call(context.Background(), "demo", tc.tool, map[string]any{"argv": []string{}, "cwd": tc.cwd}, "")
		var denied *gateway.DeniedError
		switch {
		case tc.refusal != "":
			if !errors.As(o.err, &denied) || denied.Decision.Rule != "args.invalid" || !strings.Contains(denied.Decision.Reason, tc.refusal) {
				t.Errorf("%s cwd %q: err = %v, want refusal %q", tc.tool, tc.cwd, o.err, tc.refusal)
			}
			if o.err != nil && strings.Contains(o.err.Error(), h.hostDir) {
				t.Errorf("%s cwd %q: refusal shows the host path: %v", tc.tool, tc.cwd, o.err)
			}
		case exitOf(t, o) != 0 || o.stdout != tc.want:
			t.Errorf("%s cwd %q: stdout %q stderr %q, want %q", tc.tool, tc.cwd, o.stdout, o.stderr, tc.want)
		}
	}
}

func TestDecodeArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw, err string
		argv     []string
	}{
		{``, "", nil},
		{`{}`, "", nil},
		{`null`, "", nil},
		{`{"argv":["a","b"],"cwd":"/workspace"}`, "", []string{"a", "b"}},
		{`{"argv":"a b"}`, "cannot unmarshal", nil},
		{`{"argv":[1]}`, "cannot unmarshal", nil},
		{`{"args":["a"]}`, "unknown field", nil},
		{`{"argv":[]} {}`, "trailing data", nil},
		{`{"argv":["a\u0000b"]}`, "NUL", nil},
		{`{"cwd":"/workspace\u0000"}`, "NUL", nil},
		{`[]`, "cannot unmarshal", nil},
	} {
		a, err := DecodeArgs(json.RawMessage(tc.raw))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.raw, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q", tc.raw, err, tc.err)
		case tc.err == "" && strings.Join(a.Argv, "\x00") != strings.Join(tc.argv, "\x00"):
			t.Errorf("%s: argv %q", tc.raw, a.Argv)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	t.Parallel()
	store, err := secrets.New("", map[string]config.Secret{"tok": {Value: token}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    config.Plugin
		want string
	}{
		{"x", config.Plugin{Kind: "nope"}, `plugins.x: unknown kind "nope" (known: [builtin command])`},
		{"x", config.Plugin{Kind: "builtin"}, `plugins.x: builtin: no handler "x"`},
		{"x", config.Plugin{Kind: "builtin", Builtin: "toolgate-echo", Command: "/bin/true"}, "do not apply to kind builtin"},
		{"x", config.Plugin{Kind: "command", Command: "git"}, "not an absolute host path"},
		{"x", config.Plugin{Kind: "command", Command: "/bin/true", Args: []string{"{{secret:tok}}"}}, "secrets go in env"},
		{"x", config.Plugin{Kind: "command", Command: "/bin/true", Env: map[string]string{"A": "{{secret:nope}}"}}, `env.A: secret "nope" is not defined`},
		{"x", config.Plugin{Kind: "command", Command: "/bin/true", Env: map[string]string{"A": "{{secret:tok"}}, "unterminated"},
		{"x", config.Plugin{Kind: "command", Command: "/bin/true", Timeout: -1}, "timeout"},
		{"x", config.Plugin{Kind: "command", Command: "/bin/true", MaxOutput: -1}, "maxOutput"},
		{"read", config.Plugin{Kind: "builtin", Builtin: "toolgate-echo"}, "core tool"},
	} {
		_, err := Build(&config.Config{Plugins: map[string]config.Plugin{tc.name: tc.p}}, Env{Secrets: store})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.p, err, tc.want)
		}
	}
}

// registerTestSecret registers the builtin once per test binary, however
// often the test runs (-count).
var registerTestSecret = sync.OnceFunc(func() {
	RegisterBuiltin("test-secret", func(_ context.Context, inv *Invocation) (int, error) {
		v, err := inv.Secret("tok")
		if err != nil {
			return 0, err
		}
		sum := sha256.Sum256([]byte(v))
		fmt.Fprintf(inv.Stdout, "%x\n%s\n", sum, v)
		return 0, nil
	})
})

func TestBuiltinSecret(t *testing.T) {
	t.Parallel()
	registerTestSecret()
	h := newHarness(t, map[string]config.Plugin{"hash": {Kind: "builtin", Builtin: "test-secret"}}, tokenDefs)
	o := h.call(context.Background(), "demo", "hash", argv(), "")
	sum := sha256.Sum256([]byte(token))
	if exitOf(t, o) != 0 || o.stdout != hex.EncodeToString(sum[:])+"\n"+secrets.Redacted+"\n" {
		t.Errorf("stdout %q", o.stdout)
	}
	if o = h.call(context.Background(), "other", "hash", argv(), ""); o.err == nil || strings.Contains(o.err.Error(), token) {
		t.Errorf("out-of-scope builtin: err = %v", o.err)
	}
}

func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"argv":["a"],"cwd":"/workspace/x"}`, `{}`, `{"argv":null}`, `{"argv":["\u0000"]}`, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := DecodeArgs(json.RawMessage(raw))
		if err != nil {
			return
		}
		cwd, rel, err := sandboxCwd(a.Cwd, "/workspace")
		if err != nil {
			return
		}
		if cwd != "/workspace" && !strings.HasPrefix(cwd, "/workspace/") {
			t.Fatalf("cwd %q accepted as %q", a.Cwd, cwd)
		}
		if rel == ".." || strings.HasPrefix(rel, "../") || strings.HasPrefix(rel, "/") {
			t.Fatalf("cwd %q maps to relative %q", a.Cwd, rel)
		}
	})
}

// A builtin's name is the tool name a config gets by default, and so the
// launcher in /tools/bin, first on the sandbox's PATH: it must not hide a
// command every image has (echo did).
func TestBuiltinNamesShadowNoCommand(t *testing.T) {
	t.Parallel()
	builtinMu.RLock()
	defer builtinMu.RUnlock()
	for name := range builtins {
		if p, err := exec.LookPath(name); err == nil {
			t.Errorf("builtin %q shadows %s", name, p)
		}
	}
}
