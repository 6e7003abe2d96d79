package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

// testExecutor serves an executor on a temp socket and returns a client.
func testExecutor(t *testing.T) *http.Client {
	t.Helper()
	old := callsDir
	callsDir = t.TempDir()
	t.Cleanup(func() { callsDir = old })
	sock := filepath.Join(t.TempDir(), proto.ExecSocketName)
	ln, err := ListenExecutor(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go ServeExecutor(ln)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
}

func postExec(t *testing.T, c *http.Client, ctx context.Context, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://executor"+proto.ExecRoute, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

type frames struct {
	stdout, stderr string
	exit           *proto.ExecExit
}

func readAll(t *testing.T, r io.Reader) frames {
	t.Helper()
	var f frames
	dec := json.NewDecoder(r)
	for {
		var fr proto.ExecFrame
		if err := dec.Decode(&fr); err != nil {
			if errors.Is(err, io.EOF) {
				return f
			}
			t.Fatal(err)
		}
		f.stdout += string(fr.Stdout)
		f.stderr += string(fr.Stderr)
		if fr.Exit != nil {
			if f.exit != nil {
				t.Fatal("two exit frames")
			}
			f.exit = fr.Exit
		}
	}
}

func TestExecutor(t *testing.T) {
	c := testExecutor(t)
	tests := []struct {
		name, body     string
		code           int
		timedOut       bool
		stdout, stderr string
	}{
		{"stdin, streams, env, exit", `{"argv":["sh","-c","cat; echo $X >&2; exit 3"],"env":["X=y"]}` + "\nhello", 3, false, "hello", "y\n"},
		{"cwd and call id", `{"argv":["sh","-c","pwd; echo $TOOLGATE_CALL_ID"],"cwd":"/","callId":"c1","env":["TOOLGATE_CALL_ID=c1"]}` + "\n", 0, false, "/\nc1\n", ""},
		{"not found", `{"argv":["no-such-command"]}` + "\n", 127, false, "", "toolgate-client run: exec: \"no-such-command\": executable file not found in $PATH\n"},
		{"timeout kills the group", `{"argv":["sh","-c","sleep 100 & sleep 100"],"timeout":"300ms"}` + "\n", 124, true, "", "toolgate: command timed out after 300ms; its process group was killed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postExec(t, c, context.Background(), tt.body)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatal(resp.Status)
			}
			f := readAll(t, resp.Body)
			if f.exit == nil || f.exit.ExitCode != tt.code || f.exit.TimedOut != tt.timedOut || f.stdout != tt.stdout || f.stderr != tt.stderr {
				t.Fatalf("got %+v %q %q", f.exit, f.stdout, f.stderr)
			}
		})
	}
}

func TestExecutorRefusesBadRequests(t *testing.T) {
	c := testExecutor(t)
	for _, body := range []string{
		"{}\n", `{"argv":[]}` + "\n", `{"argv":["true"],"x":1}` + "\n", `{"argv":["true"],"callId":"../x"}` + "\n",
		`{"argv":["true"],"timeout":"soon"}` + "\n", `{"argv":["true"],"cwd":"rel"}` + "\n", "no line",
		`{"argv":["` + strings.Repeat("a", proto.MaxExecLine) + `"]}` + "\n",
	} {
		resp := postExec(t, c, context.Background(), body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%.40q: %s", body, resp.Status)
		}
	}
}

// The caller going away kills the call's whole process group.
func TestExecutorConnectionGoneKillsGroup(t *testing.T) {
	c := testExecutor(t)
	ctx, cancel := context.WithCancel(context.Background())
	resp := postExec(t, c, ctx, `{"argv":["sh","-c","sleep 100 & echo $$; wait"]}`+"\n")
	var fr proto.ExecFrame
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &fr) != nil {
		t.Fatalf("%q %v", line, err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(fr.Stdout)))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	for range 500 {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process group %d still alive after its caller went", pgid)
}
