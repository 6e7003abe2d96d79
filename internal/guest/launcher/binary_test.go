package launcher_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/guest/launcher"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/cclient"
	"github.com/toolgate/toolgate/internal/proto/cclient/cclienttest"
	"github.com/toolgate/toolgate/internal/testenv"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binary is the launcher built from launch.c, once per test process.
func binary(t testing.TB) string {
	t.Helper()
	testenv.NeedPrograms(t, "musl-gcc")
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "toolgate-launch-"); buildErr != nil {
			return
		}
		built = filepath.Join(buildDir, "toolgate-launch")
		buildErr = launcher.Build(built)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// answers are gateway answers (raw HTTP) and what the launcher makes of
// them; they are the fuzzer's seeds too.
var answers = []struct {
	name, answer string
	code         int
	stdout       string
	stderr       string // exactly, "" for nothing
}{
	{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n12\r\n{\"stdout\":\"aGkK\"}\n\r\n1a\r\n{\"result\":{\"exitCode\":3}}\n\r\n0\r\n\r\n", 3, "hi\n", ""},
	{"chunks split frames", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"std\r\nd\r\nout\":\"aGkK\"}\n\r\n1a\r\n{\"result\":{\"exitCode\":0}}\n\r\n0\r\n\r\n", 0, "hi\n", ""},
	{"content length", "HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n{\"result\":{\"exitCode\":0}}\n", 0, "", ""},
	{"to the end", "HTTP/1.1 200 OK\r\n\r\n{\"stdout\":\"YQ==\"}\n{\"stdout\":null}\n{}\nnull\n{\"result\":{\"exitCode\":null}}\n", 0, "a", ""},
	{"keys fold case", "HTTP/1.1 200 OK\r\n\r\n{\"STDOUT\":\"YQ==\",\"x\":[1,{\"y\":true}]}\n{\"Result\":{\"ExitCode\":5}}\n", 5, "a", ""},
	{"denied", "HTTP/1.1 403 Forbidden\r\nContent-Length: 62\r\n\r\n{\"error\":{\"code\":\"denied\",\"rule\":\"r\",\"message\":\"no\",\"id\":\"x\"}}", proto.LaunchExitDenied, "", "toolgate: t: denied (r; audit id x): no\n"},
	{"error with rule", "HTTP/1.1 400 Bad Request\r\n\r\n{\"error\":{\"code\":\"bad_request\",\"rule\":\"args.invalid\",\"message\":\"m\"}}", proto.LaunchExitUsage, "", "toolgate: t: bad_request (args.invalid): m\n"},
	{"not found", "HTTP/1.1 404 Not Found\r\n\r\n{\"error\":{\"code\":\"not_found\",\"message\":\"unknown tool\"}}", proto.LaunchExitNotFound, "", "toolgate: t: not_found: unknown tool\n"},
	{"unavailable", "HTTP/1.1 503 Service Unavailable\r\n\r\n{\"error\":{\"code\":\"audit_unavailable\",\"message\":\"m\"}}", proto.LaunchExitUnavailable, "", "toolgate: t: audit_unavailable: m\n"},
	{"not json", "HTTP/1.1 500\r\n\r\nnot json \n", proto.LaunchExitSoftware, "", "toolgate: t: gateway answered 500: not json\n"},
	{"error null", "HTTP/1.1 413\r\n\r\n{\"error\":null}", proto.LaunchExitUsage, "", "toolgate: t: gateway answered 413: {\"error\":null}\n"},
	{"error frame denied", "HTTP/1.1 200 OK\r\n\r\n{\"error\":{\"code\":\"denied\"}}\n", proto.LaunchExitDenied, "", "toolgate: t: denied: \n"},
	{"error frame", "HTTP/1.1 200 OK\r\n\r\n{\"error\":{\"code\":\"internal\",\"message\":\"x\\u00e9\\ud83d\\ude00\"}}\n", proto.LaunchExitSoftware, "", "toolgate: t: internal: xé😀\n"},
	{"result error", "HTTP/1.1 200 OK\r\n\r\n{\"stderr\":\"eA==\"}\n{\"result\":{\"error\":\"boom\"}}\n", proto.LaunchExitSoftware, "", "xtoolgate: t: boom\n"},
	{"result error and code", "HTTP/1.1 200 OK\r\n\r\n{\"result\":{\"error\":\"timed out\",\"exitCode\":124}}\n", 124, "", "toolgate: t: timed out\n"},
	{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", proto.LaunchExitUnavailable, "", "toolgate: t: reading from the gateway: bad chunk size \"zz\"\n"},
	{"exit code over 255", "HTTP/1.1 200 OK\r\n\r\n{\"result\":{\"exitCode\":300}}\n", proto.LaunchExitProtocol, "", "toolgate: t: bad exit code 300 from the gateway\n"},
	{"exit code negative", "HTTP/1.1 200 OK\r\n\r\n{\"result\":{\"exitCode\":-1}}\n", proto.LaunchExitProtocol, "", "toolgate: t: bad exit code -1 from the gateway\n"},
	{"exit code not an integer", "HTTP/1.1 200 OK\r\n\r\n{\"result\":{\"exitCode\":1.5}}\n", proto.LaunchExitProtocol, "", "toolgate: t: bad frame from the gateway: cannot unmarshal number into an exit code\n"},
	{"exit code overflows", "HTTP/1.1 200 OK\r\n\r\n{\"result\":{\"exitCode\":99999999999999999999}}\n", proto.LaunchExitProtocol, "", "toolgate: t: bad frame from the gateway: cannot unmarshal number into an exit code\n"},
	{"bad base64", "HTTP/1.1 200 OK\r\n\r\n{\"stdout\":\"YQ=\"}\n", proto.LaunchExitProtocol, "", "toolgate: t: bad frame from the gateway: illegal base64 data\n"},
	{"stdout not a string", "HTTP/1.1 200 OK\r\n\r\n{\"stdout\":5}\n", proto.LaunchExitProtocol, "", "toolgate: t: bad frame from the gateway: cannot unmarshal into []byte\n"},
	{"trailing data", "HTTP/1.1 200 OK\r\n\r\n{} {}\n", proto.LaunchExitProtocol, "", "toolgate: t: bad frame from the gateway: invalid character after top-level value\n"},
	{"empty frame", "HTTP/1.1 200 OK\r\n\r\n\n", proto.LaunchExitProtocol, "", "toolgate: t: bad frame from the gateway: unexpected end of JSON input\n"},
	{"bad content length", "HTTP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n", proto.LaunchExitUnavailable, "", "toolgate: t: connection to the gateway lost before it answered (gateway restarting?): bad Content-Length \"-1\"\n"},
	{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", proto.LaunchExitUnavailable, "", "toolgate: t: connection to the gateway lost before it answered (gateway restarting?): bad status \"2x0\"\n"},
	{"garbage", "garbage\x01\n", proto.LaunchExitUnavailable, "", "toolgate: t: connection to the gateway lost before it answered (gateway restarting?): not an HTTP response: \"garbage\\x01\"\n"},
	{"nothing", "", proto.LaunchExitUnavailable, "", "toolgate: t: connection to the gateway lost before it answered (gateway restarting?): EOF\n"},
	{"cut mid-call", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n12\r\n{\"stdout\":\"aGkK\"}\n\r\n", proto.LaunchExitUnavailable, "hi\n", "toolgate: t: connection to the gateway lost mid-call (gateway restarting?); the call's outcome is unknown\n"},
	{"cut mid-frame", "HTTP/1.1 200 OK\r\n\r\n{\"stdout\":", proto.LaunchExitUnavailable, "", "toolgate: t: connection to the gateway lost mid-call (gateway restarting?); the call's outcome is unknown\n"},
	{"body ends without result", "HTTP/1.1 200 OK\r\nContent-Length: 18\r\n\r\n{\"stdout\":\"aGkK\"}\n{\"result\":{}}\n", proto.LaunchExitUnavailable, "hi\n", "toolgate: t: connection to the gateway lost mid-call (gateway restarting?); the call's outcome is unknown\n"},
	{"long frame", "HTTP/1.1 200 OK\r\n\r\n{\"stdout\":\"" + strings.Repeat("QUJD", 50000) + "\"}\n{\"result\":{\"exitCode\":0}}\n", 0, strings.Repeat("ABC", 50000), ""},
}

// serveOnce answers one connection on a new socket with answer and
// returns the socket's path and the request it read.
func serveOnce(t *testing.T, answer string) (string, <-chan string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "gw.sock")
	return sock, cclienttest.ServeOnce(t, sock, answer)
}

// Whatever the gateway answers, the launcher ends with the exit code and
// the words the table gives.
func TestAnswers(t *testing.T) {
	for _, tt := range answers {
		t.Run(tt.name, func(t *testing.T) {
			sock, _ := serveOnce(t, tt.answer)
			cmd := exec.Command(binary(t))
			cmd.Args[0] = "t"
			cmd.Env = []string{"TOOLGATE_SOCKET=" + sock}
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			_ = cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != tt.code || o.String() != tt.stdout || e.String() != tt.stderr {
				t.Fatalf("got %d %.60q %q, want %d %.60q %q", code, o.String(), e.String(), tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// The request is the one docs/protocol.md gives, its call header what Go's
// encoding/json writes for the same values (the gateway parses it so).
func TestRequest(t *testing.T) {
	argv := []string{"a b", `"q"\`, "<&>", "\u2028\u2029", "\x01\x7f\b\f\n\r\t", "a\xffb\xc3", "é😀", ""}
	for _, tc := range []struct {
		name, session, parent string
	}{{"hints", "s-1", "call-2"}, {"no hints", "", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			sock, got := serveOnce(t, "HTTP/1.1 200 OK\r\n\r\n{\"result\":{\"exitCode\":0}}\n")
			dir := t.TempDir()
			cmd := exec.Command(binary(t), argv...)
			cmd.Args[0] = "/tools/bin/my-tool_1.x"
			cmd.Dir = dir
			cmd.Env = []string{"TOOLGATE_SOCKET=" + sock, proto.EnvCallID + "=" + tc.parent, proto.SessionEnv + "=" + tc.session}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			hdr, _ := json.Marshal(struct {
				Argv    []string `json:"argv"`
				Cwd     string   `json:"cwd,omitempty"`
				Session string   `json:"session,omitempty"`
				Parent  string   `json:"parent,omitempty"`
			}{argv, dir, tc.session, tc.parent})
			want := "POST " + proto.CallPath("my-tool_1.x") + " HTTP/1.1\r\nHost: toolgate\r\nUser-Agent: toolgate-client\r\n" +
				"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(hdr)) + "\r\n\r\n" + string(hdr)
			if req := <-got; req != want {
				t.Fatalf("request\n%q\nwant\n%q", req, want)
			}
		})
	}
	t.Run("streamed", func(t *testing.T) {
		sock, got := serveOnce(t, "HTTP/1.1 200 OK\r\n\r\n{\"result\":{\"exitCode\":0}}\n")
		cmd := exec.Command(binary(t))
		cmd.Args[0] = "t"
		cmd.Dir = "/"
		cmd.Env = []string{"TOOLGATE_SOCKET=" + sock}
		cmd.Stdin = strings.NewReader("hello")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		req := <-got
		head, body, _ := strings.Cut(req, "\r\n\r\n")
		if !strings.Contains(head, "\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked") {
			t.Fatalf("head %q", head)
		}
		// The header, the stdin frame(s), the eof frame, in chunks.
		var frames []string
		r := bufio.NewReader(strings.NewReader(body))
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
			if err != nil || n == 0 {
				break
			}
			b := make([]byte, n+2)
			if _, err := io.ReadFull(r, b); err != nil {
				t.Fatal(err)
			}
			frames = append(frames, string(b[:n]))
		}
		all := strings.Join(frames, "")
		if all != "{\"argv\":[],\"cwd\":\"/\"}\n{\"stdin\":\"aGVsbG8=\"}\n{\"eof\":true}\n" {
			t.Fatalf("frames %q", all)
		}
	})
}

// The names and numbers the launcher defines are internal/proto's.
func TestConstantsAreProto(t *testing.T) {
	src := cSources(t, filepath.Join(cclient.Dir(), "client.c"), launcher.Source())
	def := func(name string) string {
		v, ok := cclient.Define(src, name)
		if !ok {
			t.Fatalf("the C sources define no %s", name)
		}
		return v
	}
	enum := func(name string) int {
		n, ok := cclient.Enum(src, name)
		if !ok {
			t.Fatalf("the C sources have no %s", name)
		}
		return n
	}
	for _, c := range []struct{ got, want any }{
		{def("TG_SOCKET_PATH"), proto.SocketPath},
		{def("TG_ENV_CALL_ID"), proto.EnvCallID},
		{def("TG_ENV_SESSION"), proto.SessionEnv},
		{def("TG_CALL_PREFIX") + "NAME" + def("TG_CALL_SUFFIX"), proto.CallPath("NAME")},
		{def("DIAL_TIMEOUT_S") + "s", proto.DialTimeout.String()},
		{enum("EXIT_USAGE"), proto.LaunchExitUsage},
		{enum("EXIT_UNAVAILABLE"), proto.LaunchExitUnavailable},
		{enum("EXIT_SOFTWARE"), proto.LaunchExitSoftware},
		{enum("EXIT_PROTOCOL"), proto.LaunchExitProtocol},
		{enum("EXIT_DENIED"), proto.LaunchExitDenied},
		{enum("EXIT_NOTFOUND"), proto.LaunchExitNotFound},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("the C sources have %v, Go %v", c.got, c.want)
		}
	}
}

func cSources(t *testing.T, files ...string) []byte {
	var src []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	return src
}

// The launcher is static (no loader, no libraries: it runs in any sandbox
// image, and starts without a dynamic link) and small.
func TestStatic(t *testing.T) {
	bin := binary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("toolgate-launch has a %v program header: not static", p.Type)
		}
	}
	if fi, err := os.Stat(bin); err != nil || fi.Size() > 256<<10 {
		t.Errorf("toolgate-launch: %v, %d bytes (over 256 KiB)", err, fi.Size())
	}
}

// TestFuzzResponse builds fuzz_response.c with libFuzzer and the address
// and undefined-behaviour sanitizers and runs it for a bounded time
// (TOOLGATE_FUZZ_TIME seconds, default 10) from the answers above. A crash,
// leak, hang or undefined behaviour fails the test with the input saved.
func TestFuzzResponse(t *testing.T) {
	if testing.Short() {
		t.Skip("fuzzing takes seconds")
	}
	clang := "clang-14"
	if _, err := exec.LookPath(clang); err != nil {
		clang = "clang"
	}
	testenv.NeedPrograms(t, clang)
	dir := t.TempDir()
	fuzzer := filepath.Join(dir, "fuzz_response")
	cmd := exec.Command(clang, "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=undefined",
		"-Wall", "-Wextra", "-Wno-unused-function", "-Werror", "-I", cclient.Dir(), "-o", fuzzer, filepath.Join(filepath.Dir(launcher.Source()), "fuzz_response.c"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the fuzzer: %v\n%s", err, out)
	}
	corpus := filepath.Join(dir, "corpus")
	if err := os.Mkdir(corpus, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if len(a.answer) > 4096 {
			continue // libFuzzer's inputs are up to 4 KiB: long ones slow every run
		}
		// The first byte is the size of each read: whole, and byte by byte.
		for j, step := range []byte{0, 1} {
			if err := os.WriteFile(filepath.Join(corpus, fmt.Sprintf("seed-%d-%d", i, j)), append([]byte{step}, a.answer...), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	secs := 10
	if s, err := strconv.Atoi(os.Getenv("TOOLGATE_FUZZ_TIME")); err == nil && s > 0 {
		secs = s
	}
	var out bytes.Buffer
	run := exec.Command(fuzzer, "-max_total_time="+strconv.Itoa(secs), "-timeout=10", "-rss_limit_mb=1024",
		"-artifact_prefix="+dir+"/", corpus)
	run.Stdout, run.Stderr = &out, &out
	start := time.Now()
	if err := run.Run(); err != nil {
		t.Fatalf("fuzzer failed after %s: %v\n%s", time.Since(start).Round(time.Second), err, tail(out.String(), 4000))
	}
	t.Logf("%s", tail(out.String(), 300))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
