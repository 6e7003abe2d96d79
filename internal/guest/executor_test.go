package guest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

// serveTestExecutor serves an executor on a temp socket (its call records
// in a temp callsDir) and returns the socket's path.
func serveTestExecutor(t *testing.T) string {
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
	return sock
}

// testExecutor serves an executor on a temp socket and returns a client.
func testExecutor(t *testing.T) *http.Client {
	t.Helper()
	sock := serveTestExecutor(t)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
}

// postExec posts an exec request; accept "" is a gateway that predates
// binary frames.
func postExec(t *testing.T, c *http.Client, ctx context.Context, accept, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://executor"+proto.ExecRoute, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
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

// readAll reads a response's exec frames.
func readAll(t *testing.T, resp *http.Response) frames {
	t.Helper()
	if media := resp.Header.Get("Content-Type"); media != proto.ExecFramesMedia {
		t.Fatalf("Content-Type %q", media)
	}
	var o, e strings.Builder
	exit, err := proto.ReadExecFrames(resp.Body, &o, &e)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := resp.Body.Read(make([]byte, 1)); n != 0 {
		t.Fatal("data after the exit frame")
	}
	return frames{o.String(), e.String(), exit}
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
			resp := postExec(t, c, context.Background(), proto.ExecFramesMedia, tt.body)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatal(resp.Status)
			}
			f := readAll(t, resp)
			if f.exit == nil || f.exit.ExitCode != tt.code || f.exit.TimedOut != tt.timedOut || f.stdout != tt.stdout || f.stderr != tt.stderr {
				t.Fatalf("got %+v %q %q", f.exit, f.stdout, f.stderr)
			}
		})
	}
}

// The executor answers in one format: a peer that does not ask for binary
// frames (NDJSON was the format before them) is refused before anything
// runs.
func TestExecutorRefusesOtherFormats(t *testing.T) {
	c := testExecutor(t)
	mark := filepath.Join(t.TempDir(), "ran")
	for _, accept := range []string{"", "application/x-ndjson", "*/*"} {
		resp := postExec(t, c, context.Background(), accept, `{"argv":["touch",`+strconv.Quote(mark)+`]}`+"\n")
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotAcceptable || !strings.Contains(string(msg), proto.ExecFramesMedia) {
			t.Errorf("Accept %q: %s %q", accept, resp.Status, msg)
		}
	}
	if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused request ran: %v", err)
	}
}

// A request whose body is its line alone, its length stated (how the
// gateway sends a call without stdin), gives the command /dev/null; a
// body of stated length with more after the line, or a chunked one (stdin
// streamed, even when it turns out empty), gives it a pipe with those
// bytes.
func TestExecutorStdin(t *testing.T) {
	c := testExecutor(t)
	const probe = `{"argv":["sh","-c","readlink /proc/self/fd/0; cat"]}` + "\n"
	for _, tt := range []struct {
		name    string
		body    io.Reader
		length  int64
		pipe    bool
		content string
	}{
		{"line alone, length stated", strings.NewReader(probe), int64(len(probe)), false, ""},
		{"stdin after the line, length stated", strings.NewReader(probe + "hello"), int64(len(probe) + 5), true, "hello"},
		{"chunked, stdin empty", io.MultiReader(strings.NewReader(probe)), -1, true, ""},
		{"chunked, stdin", io.MultiReader(strings.NewReader(probe), strings.NewReader("hi")), -1, true, "hi"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://executor"+proto.ExecRoute, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tt.length
			req.Header.Set("Accept", proto.ExecFramesMedia)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			f := readAll(t, resp)
			stdin, content, _ := strings.Cut(f.stdout, "\n")
			if f.exit == nil || f.exit.ExitCode != 0 || content != tt.content || strings.HasPrefix(stdin, "pipe:") != tt.pipe ||
				!tt.pipe && stdin != os.DevNull {
				t.Fatalf("stdin %q, content %q, exit %+v, stderr %q", stdin, content, f.exit, f.stderr)
			}
		})
	}
}

// Large output travels in frames that grow while reads fill them, up to
// proto.MaxFramePayload; every byte arrives once, in order.
func TestExecutorLargeOutput(t *testing.T) {
	c := testExecutor(t)
	const size = 8 << 20
	body := `{"argv":["head","-c","` + strconv.Itoa(size) + `","/dev/urandom"]}` + "\n"
	resp := postExec(t, c, context.Background(), proto.ExecFramesMedia, body)
	defer resp.Body.Close()
	var sizes []int
	var out bytes.Buffer
	sizer := writerFunc(func(p []byte) (int, error) { sizes = append(sizes, len(p)); return out.Write(p) })
	if _, err := proto.ReadExecFrames(resp.Body, sizer, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out.Len() != size || slices.Max(sizes) > proto.MaxFramePayload {
		t.Fatalf("%d bytes in frames up to %d, want %d in frames up to %d", out.Len(), slices.Max(sizes), size, proto.MaxFramePayload)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestExecutorRefusesBadRequests(t *testing.T) {
	c := testExecutor(t)
	for _, body := range []string{
		"{}\n", `{"argv":[]}` + "\n", `{"argv":["true"],"x":1}` + "\n", `{"argv":["true"],"callId":"../x"}` + "\n",
		`{"argv":["true"],"timeout":"soon"}` + "\n", `{"argv":["true"],"cwd":"rel"}` + "\n", "no line",
		`{"argv":["` + strings.Repeat("a", proto.MaxExecLine) + `"]}` + "\n",
	} {
		resp := postExec(t, c, context.Background(), proto.ExecFramesMedia, body)
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
	resp := postExec(t, c, ctx, proto.ExecFramesMedia, `{"argv":["sh","-c","sleep 100 & echo $$; wait"]}`+"\n")
	// The first frame is the shell's pid line.
	fr := make([]byte, proto.FrameHeaderLen)
	if _, err := io.ReadFull(resp.Body, fr); err != nil || fr[0] != proto.FrameStdout {
		t.Fatalf("%q %v", fr, err)
	}
	pid := make([]byte, binary.BigEndian.Uint32(fr[1:]))
	if _, err := io.ReadFull(resp.Body, pid); err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(pid)))
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
