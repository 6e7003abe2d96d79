package guest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv/wait"
)

// putRequest posts `put ARGS` with stdin to the executor; builtin says
// whether the request offers the in-process put (a current gateway) or
// not — which is also exactly how an executor that predates it treats any
// request: it runs the child. The child is this test binary acting as
// toolgate-client.
func putRequest(t *testing.T, c *http.Client, builtin bool, cwd string, args []string, stdin []byte) (*http.Response, frames) {
	t.Helper()
	line, _ := json.Marshal(proto.ExecRequest{
		Argv: append([]string{builtinClient, "put"}, args...), Cwd: cwd,
		Env: []string{"TOOLGATE_CLIENT_TEST_CALLS=" + t.TempDir()},
	})
	req, err := http.NewRequest(http.MethodPost, "http://executor"+proto.ExecRoute, bytes.NewReader(append(append(line, '\n'), stdin...)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", proto.ExecFramesMedia)
	if builtin {
		req.Header.Set(proto.ExecBuiltinHeader, proto.ExecBuiltinPut)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp, readAll(t, resp)
}

// TestExecutorServesPut: offered the in-process put, the executor writes
// the file itself (and says so: no child ran) with exactly the child's
// answers — exit code and stderr — for whole, cut and refused content, and
// a relative path resolves against the call's cwd as the child's does.
// Without the offer (an older gateway), and so in an older executor, the
// same request runs the child, with the same results.
func TestExecutorServesPut(t *testing.T) {
	c := testExecutor(t)
	old := builtinClient
	builtinClient = os.Args[0]
	t.Cleanup(func() { builtinClient = old })

	content := bytes.Repeat([]byte("0123456789abcdef"), 70<<10) // > 1 MiB: several request chunks
	trailer := proto.DigestTrailer(sha256.Sum256(content))
	size := fmt.Sprint(len(content))
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name   string
		rel    string // the path, relative to the call's cwd when cwd is set
		cwd    bool
		args   []string // after PATH
		stdin  []byte
		code   int
		stderr string
	}{
		{"whole", "f.bin", false, []string{size, "-"}, cat(content, trailer), 0, ""},
		{"relative to cwd", "sub/f.bin", true, []string{size, "-"}, cat(content, trailer), 0, ""},
		{"cut short", "f.bin", false, []string{size, "-"}, content[:1000], 1, "input ended after 1000 of"},
		{"no trailer", "f.bin", false, []string{size, "-"}, content, 1, "digest trailer is missing"},
		{"bad size", "f.bin", false, []string{"-1", "-"}, nil, proto.ExitUsage, `put: bad size "-1"`},
	}
	for _, tc := range cases {
		got := map[bool]frames{}
		dir := t.TempDir() // one for both, so the messages compare
		for _, builtin := range []bool{true, false} {
			os.RemoveAll(filepath.Join(dir, tc.rel))
			target := filepath.Join(dir, tc.rel)
			p, cwd := target, ""
			if tc.cwd {
				p, cwd = tc.rel, dir
			}
			resp, f := putRequest(t, c, builtin, cwd, append([]string{p}, tc.args...), tc.stdin)
			if served := resp.Header.Get(proto.ExecBuiltinHeader) == proto.ExecBuiltinPut; served != builtin {
				t.Errorf("%s (offered %v): served in process: %v", tc.name, builtin, served)
			}
			if f.exit == nil || f.exit.ExitCode != tc.code || !strings.Contains(f.stderr, tc.stderr) || (tc.stderr == "") != (f.stderr == "") {
				t.Errorf("%s (offered %v): exit %+v, stderr %q; want %d, %q", tc.name, builtin, f.exit, f.stderr, tc.code, tc.stderr)
			}
			b, err := os.ReadFile(target)
			if tc.code == 0 && !bytes.Equal(b, content) {
				t.Errorf("%s (offered %v): the file has %d bytes (%v)", tc.name, builtin, len(b), err)
			}
			if tc.code != 0 && err == nil {
				t.Errorf("%s (offered %v): a refused put wrote the file", tc.name, builtin)
			}
			if entries, _ := os.ReadDir(filepath.Dir(target)); tc.code != 0 && len(entries) != 0 {
				t.Errorf("%s (offered %v): left %v", tc.name, builtin, entries)
			}
			got[builtin] = f
		}
		if got[true].stderr != got[false].stderr {
			t.Errorf("%s: in process stderr %q, the child's %q", tc.name, got[true].stderr, got[false].stderr)
		}
	}
}

// TestExecutorPutConnectionGone: when the gateway's connection goes away
// mid-content, the in-process put ends and removes its temporary file; the
// target stays as it was.
func TestExecutorPutConnectionGone(t *testing.T) {
	sock := serveTestExecutor(t) // this test dials itself
	old := builtinClient
	builtinClient = os.Args[0]
	t.Cleanup(func() { builtinClient = old })

	dir := t.TempDir()
	target := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	conn, err := (&net.Dialer{}).DialContext(context.Background(), "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(proto.ExecRequest{Argv: []string{builtinClient, "put", target, "1000000", "-"}})
	body := append(append(line, '\n'), bytes.Repeat([]byte("x"), 5000)...)
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: executor\r\nTransfer-Encoding: chunked\r\nAccept: %s\r\n%s: %s\r\n\r\n%x\r\n%s\r\n",
		proto.ExecRoute, proto.ExecFramesMedia, proto.ExecBuiltinHeader, proto.ExecBuiltinPut, len(body), body)
	// The temporary file appears once put has started.
	wait.For(t, "temporary file", func() bool { e, _ := os.ReadDir(dir); return len(e) == 2 })
	conn.Close()
	wait.For(t, "removal of the temporary file", func() bool { e, _ := os.ReadDir(dir); return len(e) == 1 })
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Fatalf("the target became %q", b)
	}
}
