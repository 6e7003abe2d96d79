package agentsock_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/door/agentsock"
	"github.com/toolgate/toolgate/internal/host/door/agentsock/sockettest"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
)

func httpClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

type answer struct {
	status int
	stdout string
	stderr string
	result *gateway.Result
	err    *api.Error
}

func post(t *testing.T, sock, tool, ctype, body string) answer {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://toolgate/v1/tools/"+tool+"/call", strings.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	resp, err := httpClient(sock).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error *api.Error }
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("status %d with a body that is not a JSON error: %v", resp.StatusCode, err)
		}
		a.err = e.Error
		return a
	}
	var o, e bytes.Buffer
	a.result, err = adminclient.ReadFrames(resp.Body, &o, &e)
	var we *api.Error
	if errors.As(err, &we) {
		a.err = we
	} else if err != nil {
		t.Fatal(err)
	}
	a.stdout, a.stderr = o.String(), e.String()
	return a
}

func TestCalls(t *testing.T) {
	t.Parallel()
	env := sockettest.New(t, sockettest.Allowlist{"a": {"echo", "cat"}, "b": {}}, &sockettest.Func{ToolName: "cat",
		Fn: func(_ context.Context, _ *gateway.Call, s *gateway.Streams) (*gateway.Result, error) {
			_, err := io.Copy(s.Stdout, s.Stdin)
			code := 3
			return &gateway.Result{ExitCode: &code}, err
		}})
	env.Serve(t, "a", "b")
	sa, sb := env.SocketPath("a"), env.SocketPath("b")
	big := `{"argv":["` + strings.Repeat("x", agentsock.DefaultMaxHeader) + `"]}`
	tests := []struct {
		name, sock, tool, ctype, body string
		status                        int
		stdout, errCode, rule         string
		exit                          int
	}{
		{"echo json", sa, "echo", "application/json", `{"argv":["hi"]}`, 200, "hi\n", "", "", 0},
		{"literal argv", sa, "echo", "application/json", `{"argv":["a \"q\" 'b'","x\ny","$(id)",";","rm -rf /"]}`, 200, "a \"q\" 'b' x\ny $(id) ; rm -rf /\n", "", "", 0},
		{"stdin frames", sa, "cat", api.MediaNDJSON, "{\"argv\":[]}\n{\"stdin\":\"aGVs\"}\n{\"stdin\":\"bG8K\"}\n{\"eof\":true}\n", 200, "hello\n", "", "", 3},
		{"cwd inside", sa, "echo", "", `{"argv":["x"],"cwd":"/workspace/sub/.."}`, 200, "x\n", "", "", 0},
		{"unknown tool", sa, "nosuch", "application/json", `{"argv":[]}`, 404, "", "not_found", "tool.unknown", 0},
		{"not allowed", sb, "echo", "application/json", `{"argv":["hi"]}`, 403, "", "denied", "tools.allowlist", 0},
		{"other agent's tool", sb, "cat", "application/json", `{"argv":[]}`, 403, "", "denied", "tools.allowlist", 0},
		{"cwd outside", sa, "echo", "application/json", `{"argv":[],"cwd":"/workspace/../etc"}`, 400, "", "bad_request", "args.invalid", 0},
		{"malformed", sa, "echo", "application/json", `{"argv":`, 400, "", "bad_request", agentsock.RuleMalformed, 0},
		{"unknown field", sa, "echo", "application/json", `{"argv":[],"agent":"a"}`, 400, "", "bad_request", agentsock.RuleMalformed, 0},
		{"argv not strings", sa, "echo", "application/json", `{"argv":[1]}`, 400, "", "bad_request", agentsock.RuleMalformed, 0},
		{"too large json", sa, "echo", "application/json", big, 413, "", "too_large", agentsock.RuleTooLarge, 0},
		{"too large frame", sa, "echo", api.MediaNDJSON, big + "\n", 413, "", "too_large", agentsock.RuleTooLarge, 0},
		{"empty ndjson", sa, "echo", api.MediaNDJSON, "", 400, "", "bad_request", agentsock.RuleMalformed, 0},
		{"bad media", sa, "echo", "text/plain", "hi", 415, "", "bad_request", agentsock.RuleMalformed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := post(t, tt.sock, tt.tool, tt.ctype, tt.body)
			if a.status != tt.status || a.stdout != tt.stdout {
				t.Fatalf("got %d %q %+v, want %d %q", a.status, a.stdout, a.err, tt.status, tt.stdout)
			}
			if tt.errCode != "" {
				if a.err == nil || a.err.Code != tt.errCode || a.err.Rule != tt.rule {
					t.Fatalf("error %+v, want code %s rule %q", a.err, tt.errCode, tt.rule)
				}
				return
			}
			if a.err != nil || a.result == nil || a.result.ExitCode == nil || *a.result.ExitCode != tt.exit {
				t.Fatalf("result %+v err %+v, want exit %d", a.result, a.err, tt.exit)
			}
		})
	}

	// Every refusal is on the record with the socket's agent and the peer's
	// credentials, malformed requests too; each allowed call has two entries.
	byTool := map[string][]*gateway.Entry{}
	for _, e := range env.Entries(t) {
		byTool[e.Agent+"/"+e.Tool] = append(byTool[e.Agent+"/"+e.Tool], e)
		if e.Via != "socket" {
			t.Errorf("entry via %q", e.Via)
		}
		if e.Phase == gateway.PhaseDecision {
			p, _ := e.Detail["peer"].(map[string]any)
			if p == nil || p["pid"] != float64(os.Getpid()) || p["uid"] != float64(os.Getuid()) {
				t.Errorf("entry %s/%s: peer %v, want this process", e.Agent, e.Tool, e.Detail)
			}
		}
	}
	for key, n := range map[string]int{"a/nosuch": 1, "b/echo": 1, "b/cat": 1, "a/cat": 2, "a/echo": 2*3 + 1 + 7} {
		if len(byTool[key]) != n {
			t.Errorf("%s: %d entries, want %d", key, len(byTool[key]), n)
		}
	}
	if rep, err := audit.Verify(env.AuditDir); err != nil || !rep.OK() {
		t.Fatalf("audit chain: %v %+v", err, rep)
	}
}

func TestCoreToolRefused(t *testing.T) {
	t.Parallel()
	core := &coreTool{}
	env := sockettest.New(t, sockettest.Allowlist{"a": {"exec"}}, core)
	env.Serve(t, "a")
	a := post(t, env.SocketPath("a"), "exec", "application/json", `{"argv":["id"]}`)
	if a.status != 403 || a.err.Rule != "socket.kind" || core.ran {
		t.Fatalf("got %d %+v ran=%v", a.status, a.err, core.ran)
	}
	if es := env.Entries(t); len(es) != 1 || es[0].Decision != "deny" {
		t.Fatalf("entries %+v", es)
	}
}

type coreTool struct{ ran bool }

func (c *coreTool) Name() string                                   { return "exec" }
func (c *coreTool) Kind() gateway.Kind                             { return gateway.KindCore }
func (c *coreTool) Prepare(*gateway.Call, gateway.AgentInfo) error { return nil }
func (c *coreTool) Run(context.Context, *gateway.Call, *gateway.RunEnv) (*gateway.Result, error) {
	c.ran = true
	return &gateway.Result{}, nil
}

// TestDisconnectCancels: a client that goes away mid-stream cancels the
// handler, and the result entry records the error.
func TestDisconnectCancels(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"application/json", api.MediaNDJSON} {
		t.Run(mode, func(t *testing.T) {
			cancelled := make(chan error, 1)
			env := sockettest.New(t, sockettest.Allowlist{"a": {"hang"}}, &sockettest.Func{ToolName: "hang",
				Fn: func(ctx context.Context, _ *gateway.Call, s *gateway.Streams) (*gateway.Result, error) {
					_, _ = io.WriteString(s.Stdout, "started\n")
					<-ctx.Done()
					cancelled <- ctx.Err()
					return nil, ctx.Err()
				}})
			env.Serve(t, "a")
			c, err := net.Dial("unix", env.SocketPath("a"))
			if err != nil {
				t.Fatal(err)
			}
			body, hdr := `{"argv":[]}`, "Content-Length: 11\r\n"
			if mode == api.MediaNDJSON {
				// Stdin left open: the client dies before sending eof.
				body, hdr = "c\r\n{\"argv\":[]}\n\r\n", "Transfer-Encoding: chunked\r\n"
			}
			_, _ = io.WriteString(c, "POST /v1/tools/hang/call HTTP/1.1\r\nHost: x\r\nContent-Type: "+mode+"\r\n"+hdr+"\r\n"+body)
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(line, "c3RhcnRlZAo=") { // "started\n"
					break
				}
			}
			c.Close()
			if err := <-cancelled; !errors.Is(err, context.Canceled) {
				t.Fatalf("handler saw %v", err)
			}
			var res *gateway.Entry
			for res == nil { // appended just after the handler returns; bounded by the test timeout
				time.Sleep(time.Millisecond)
				for _, e := range env.Entries(t) {
					if e.Phase == gateway.PhaseResult {
						res = e
					}
				}
			}
			if !strings.Contains(res.Error, "context canceled") {
				t.Fatalf("result entry error %q", res.Error)
			}
		})
	}
}

func TestSocketPermissionsAndReload(t *testing.T) {
	t.Parallel()
	env := sockettest.New(t, sockettest.Allowlist{"a": {"echo"}, "b": {"echo"}})
	sa, sb := env.SocketPath("a"), env.SocketPath("b")
	if err := env.Server.SetAgents([]agentsock.Socket{{Agent: "a", Path: sa, UID: os.Getuid(), GID: os.Getgid()}}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sa)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(sa)); di.Mode().Perm() != 0o755 {
		t.Fatalf("socket dir mode %v", di.Mode())
	}
	if _, err := os.Stat(sb); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("b's socket exists before b is served: %v", err)
	}
	if err := env.Server.SetAgents([]agentsock.Socket{{Agent: "b", Path: sb}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sa); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a's socket survived its removal: %v", err)
	}
	if a := post(t, sb, "echo", "", `{"argv":["b"]}`); a.stdout != "b\n" {
		t.Fatalf("b after reload: %+v", a)
	}
	// A second server cannot take over a served socket; a stale file is replaced.
	other := agentsock.New(env.GW, agentsock.Options{})
	if err := other.Serve("b", sb, 0, 0); err == nil || !strings.Contains(err.Error(), "another gateway") {
		t.Fatalf("took over a live socket: %v", err)
	}
	env.Server.Close()
	ln, _ := net.Listen("unix", sa)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if err := other.Serve("a", sa, 0, 0); err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	other.Close()
}

// TestHandleMountsRoutes: other packages' routes see the socket's identity.
func TestHandleMountsRoutes(t *testing.T) {
	t.Parallel()
	env := sockettest.New(t, sockettest.Allowlist{"a": {}, "b": {}})
	env.Server.Handle("GET /v1/whoami", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := agentsock.PeerOf(r.Context())
		_ = json.NewEncoder(w).Encode(map[string]any{"agent": agentsock.Agent(r.Context()), "pid": p.PID})
	}))
	env.Serve(t, "a", "b")
	for _, agent := range []string{"a", "b"} {
		resp, err := httpClient(env.SocketPath(agent)).Get("http://x/v1/whoami?agent=evil")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Agent string
			PID   int
		}
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if got.Agent != agent || got.PID != os.Getpid() {
			t.Fatalf("via %s's socket: %+v", agent, got)
		}
	}
}

// A sandbox that opens connections and holds them cannot take more than
// its socket's share: past MaxConns the next one waits until one closes.
func TestConnectionsBounded(t *testing.T) {
	t.Parallel()
	env := sockettest.New(t, sockettest.Allowlist{"a": {"echo"}})
	srv := agentsock.New(env.GW, agentsock.Options{MaxConns: 2})
	t.Cleanup(func() { srv.Close() })
	sock := filepath.Join(env.Dir, "bounded.sock")
	if err := srv.Serve("a", sock, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		// Half a request: the connection stays open, its handler waiting.
		if _, err := io.WriteString(c, "POST /v1/tools/echo/call HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	call := func() error {
		req, _ := http.NewRequest("POST", "http://toolgate/v1/tools/echo/call", strings.NewReader(`{"argv":["hi"]}`))
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		resp, err := httpClient(sock).Do(req.WithContext(ctx))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := call(); err == nil {
		t.Fatal("a third connection was served while two were held")
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for call() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no connection served after one was released")
		}
	}
	held[1].Close()
}
