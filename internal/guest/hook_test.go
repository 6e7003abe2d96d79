package guest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/proto/cclient/cclienttest"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

func hookSample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "proto", "hooks", "testdata", "claude-code-samples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeGateway serves h on a Unix socket; it stands in for the agent socket.
func fakeGateway(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "gateway.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// runHook runs the test binary as `toolgate-client hook ARGS` with stdin.
func runHook(t *testing.T, sock, spool string, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	return runHookWithin(t, "5s", sock, spool, stdin, args...)
}

// runHookWithin runs the hook with its own deadline: short where a test
// waits for it, roomy elsewhere so a loaded machine does not turn a
// 20 MiB read into a timeout.
func runHookWithin(t *testing.T, deadline, sock, spool string, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"hook"}, args...)...)
	cmd.Env = append(os.Environ(), "TOOLGATE_CLIENT_TEST_CALLS="+t.TempDir(), "TOOLGATE_SOCKET="+sock,
		"TOOLGATE_SPOOL="+spool, "TOOLGATE_HOOK_DEADLINE="+deadline)
	cmd.Stdin = bytes.NewReader(stdin)
	return cclienttest.Run(t, cmd)
}

// decision checks stdout is exactly one PreToolUse answer and returns it.
func decision(t *testing.T, stdout string) (verdict, reason string) {
	t.Helper()
	var out struct {
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not one answer object: %q (%v)", stdout, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one object on stdout: %q", stdout)
	}
	h := out.HookSpecificOutput
	if h.HookEventName != "PreToolUse" {
		t.Fatalf("hookEventName %q", h.HookEventName)
	}
	return h.PermissionDecision, h.PermissionDecisionReason
}

func answer(body string, status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestGateAnswers(t *testing.T) {
	input := hookSample(t, "hook-input-PreToolUse-Bash.json")
	var got []byte
	var mu sync.Mutex
	echo := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = b
		mu.Unlock()
		if r.URL.Path != "/v1/hooks/pre-tool-use" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"allow":true,"rule":"rules[0]","id":"abc"}`)
	}
	slow := func(w http.ResponseWriter, r *http.Request) { time.Sleep(3 * time.Second) }
	restarting := func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: no gateway at all
		stdin   []byte
		verdict string
		reason  string
	}{
		{"allow", echo, input, "allow", ""},
		{"deny with the policy's reason", answer(`{"allow":false,"rule":"no-rm-rf","reason":"no recursive removal"}`, 200), input, "deny", "no recursive removal"},
		{"gateway down", nil, input, "deny", "gateway unavailable"},
		{"gateway slow past the deadline", slow, input, "deny", "in time"},
		{"gateway restarting", restarting, input, "deny", "no answer from the gateway"},
		{"audit unavailable", answer(`{"error":{"code":"unavailable","message":"audit log unavailable"}}`, 503), input, "deny", "audit log unavailable"},
		{"garbage answer", answer(`<html>`, 200), input, "deny", "bad answer"},
		{"empty input", echo, nil, "deny", "empty"},
		{"not JSON", echo, []byte("ls -la"), "deny", "not a JSON object"},
		{"tool_input of the wrong type", echo, []byte(`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":"ls","tool_use_id":"t"}`), "deny", "tool_input"},
		{"20 MiB", echo, append([]byte(`{"hook_event_name":"PreToolUse","x":"`), bytes.Repeat([]byte("a"), 20<<20)...), "deny", "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "none.sock")
			if tt.handler != nil {
				sock = fakeGateway(t, tt.handler)
			}
			deadline := "5s"
			if tt.reason == "in time" {
				deadline = "500ms"
			}
			code, stdout, stderr := runHookWithin(t, deadline, sock, t.TempDir(), tt.stdin, "pre-tool-use")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			verdict, reason := decision(t, stdout)
			if verdict != tt.verdict || !strings.Contains(reason, tt.reason) {
				t.Fatalf("got %s %q, want %s mentioning %q", verdict, reason, tt.verdict, tt.reason)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(got, input) {
		t.Fatalf("the gateway got %q, want the hook input as read", got)
	}
}

func TestGateExit2(t *testing.T) {
	sock := fakeGateway(t, answer(`{"allow":false,"rule":"r","reason":"nope"}`, 200))
	code, stdout, stderr := runHook(t, sock, t.TempDir(), hookSample(t, "hook-input-PreToolUse-Bash.json"), "pre-tool-use", "--exit2")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "nope") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A misconfigured command line blocks too.
	if code, _, _ := runHook(t, sock, t.TempDir(), nil, "pre-tool-usee"); code != 2 {
		t.Fatalf("bad usage exit %d, want 2", code)
	}
}

func TestTapSpoolsAndDrains(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	first := hookSample(t, "hook-input-PostToolUse-Bash.json")
	second := hookSample(t, "hook-input-PostToolUseFailure-Bash.json")

	// Gateway down, then answering 503: both events are spooled, silently.
	for _, sock := range []string{filepath.Join(t.TempDir(), "none.sock"), fakeGateway(t, answer(`{"error":{"code":"unavailable","message":"x"}}`, 503))} {
		code, stdout, stderr := runHook(t, sock, spool, first, "post-tool-use")
		if code != 0 || stdout != "" {
			t.Fatalf("tap: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(spool, "ev-*.json"))
	if len(files) != 1 {
		t.Fatalf("spool holds %v, want the one event once", files)
	}
	// A corrupt file and a half-written one left by a crashed tap.
	if err := os.WriteFile(filepath.Join(spool, "ev-deadbeef.json"), []byte(`{"v":1,"id":"deadbeef","body":{},"sum":"bad"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(spool, ".tmp-cafe-01")
	if err := os.WriteFile(half, []byte(`{"v":1,"seq":1,"id":"ca`), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(half, old, old)

	var mu sync.Mutex
	var got []hooks.Input
	sock := fakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		var in hooks.Input
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || r.URL.Path != "/v1/hooks/post-tool-use" {
			http.Error(w, "bad", 400)
			return
		}
		mu.Lock()
		got = append(got, in)
		mu.Unlock()
		io.WriteString(w, `{"id":"x"}`)
	})
	code, stdout, _ := runHook(t, sock, spool, second, "post-tool-use")
	if code != 0 || stdout != "" {
		t.Fatalf("tap: exit %d, stdout %q", code, stdout)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].HookEventName != hooks.EventPostToolUseFailure || got[1].HookEventName != hooks.EventPostToolUse {
		t.Fatalf("delivered %+v, want this event then the spooled one", got)
	}
	left, _ := filepath.Glob(filepath.Join(spool, "*"))
	quarantined, _ := filepath.Glob(filepath.Join(spool, "quarantine", "*"))
	if len(left) != 1 || filepath.Base(left[0]) != "quarantine" || len(quarantined) != 2 {
		t.Fatalf("spool after drain: %v, quarantine: %v", left, quarantined)
	}
}

func TestTapBoundsBeforeSending(t *testing.T) {
	var got []byte
	var mu sync.Mutex
	sock := fakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = b
		mu.Unlock()
		io.WriteString(w, `{}`)
	})
	in := map[string]any{"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Write", "tool_use_id": "t",
		"tool_input":    map[string]any{"file_path": "/workspace/a", "content": strings.Repeat("body", 1<<20)},
		"tool_response": map[string]any{"type": "create", "content": strings.Repeat("body", 1<<20)}}
	b, _ := json.Marshal(in)
	if code, _, stderr := runHook(t, sock, t.TempDir(), b, "post-tool-use"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) > 4096 || !bytes.Contains(got, []byte(`"bytes":4194304`)) {
		t.Fatalf("sent %d bytes: %.300s", len(got), got)
	}
}

// An event the gateway refuses for good (400, 403, 413) is not spooled:
// retried on every later tap it would stop the spool draining for ever.
func TestTapDoesNotSpoolRejected(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	sock := fakeGateway(t, answer(`{"error":{"code":"bad_request","message":"tool_input.command is missing"}}`, 400))
	code, stdout, stderr := runHook(t, sock, spool, hookSample(t, "hook-input-PostToolUse-Bash.json"), "post-tool-use")
	if code != 0 || stdout != "" || !strings.Contains(stderr, "tool_input.command is missing") {
		t.Fatalf("tap: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(spool, "ev-*.json")); len(files) != 0 {
		t.Fatalf("a rejected event was spooled: %v", files)
	}
}

// Outside a sandbox (TOOLGATE_SOCKET set, no TOOLGATE_SPOOL) the tap spools
// in the user's cache directory, not in a /workspace of the host.
func TestTapSpoolOutsideSandbox(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	code, stdout, stderr := runHook(t, filepath.Join(t.TempDir(), "none.sock"), "", hookSample(t, "hook-input-PostToolUse-Bash.json"), "post-tool-use")
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("tap: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(home, ".cache", "toolgate", "spool", "ev-*.json")); len(files) != 1 {
		t.Fatalf("spooled %v, want one event in the cache directory", files)
	}
}
