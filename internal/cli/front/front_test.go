package front_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/cli/front"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/cclient"
	"github.com/toolgate/toolgate/internal/proto/cclient/cclienttest"
	"github.com/toolgate/toolgate/internal/testenv"
)

var (
	frontOnce sync.Once
	frontDir  string
	frontErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if frontDir != "" {
		os.RemoveAll(frontDir)
	}
	os.Exit(code)
}

// The names and numbers the front defines are the Go CLI's and the admin
// API's.
func TestConstantsAreCLI(t *testing.T) {
	var src []byte
	for _, f := range []string{filepath.Join(cclient.Dir(), "client.c"), front.Source()} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for _, c := range []struct {
		name string
		want any
	}{
		{"CLI_BINARY", front.CLIBinary},
		{"EXIT_ERROR", cli.ExitError},
		{"EXIT_REFUSED", cli.ExitDenied},
		{"ADMIN_SOCKET", api.SocketName},
		{"ADMIN_TOKEN", api.TokenFile},
		{"MEDIA_NDJSON", api.MediaNDJSON},
	} {
		if got, ok := cclient.Define(src, c.name); !ok || got != fmt.Sprint(c.want) {
			t.Errorf("the C sources have %s %q (%v), Go %v", c.name, got, ok, c.want)
		}
	}
}

// standIn takes toolgate-cli's place beside a front of its own: it prints
// the words it was given, each ended by a NUL, and exits 99, so whatever
// the front hands on shows, and nothing the front should make itself can
// pass for its own work.
const standIn = "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done\nexit 99\n"

// fronts builds the front (front.c) twice, once per test process: beside
// the Go CLI, as installed (cli), and beside standIn (alone).
func fronts(t testing.TB) (cli, alone string) {
	t.Helper()
	testenv.NeedPrograms(t, "musl-gcc")
	frontOnce.Do(func() {
		if frontDir, frontErr = os.MkdirTemp("", "toolgate-front-"); frontErr != nil {
			return
		}
		for _, d := range []string{"cli", "alone"} {
			if frontErr = os.Mkdir(filepath.Join(frontDir, d), 0o755); frontErr != nil {
				return
			}
			if frontErr = front.Build(filepath.Join(frontDir, d, "toolgate")); frontErr != nil {
				return
			}
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(frontDir, "cli", front.CLIBinary), "github.com/toolgate/toolgate/cmd/toolgate-cli")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			frontErr = fmt.Errorf("building toolgate-cli: %v\n%s", err, out)
			return
		}
		frontErr = os.WriteFile(filepath.Join(frontDir, "alone", front.CLIBinary), []byte(standIn), 0o755)
	})
	if frontErr != nil {
		t.Fatal(frontErr)
	}
	return filepath.Join(frontDir, "cli"), filepath.Join(frontDir, "alone")
}

const testToken = "tg_admin_test-token"

// adminHome is a toolgate home (short-named: its socket's path must fit)
// with an admin token and an admin socket that answers one connection
// with answer; got is the request it read.
func adminHome(t *testing.T, answer string) (home string, got <-chan string) {
	t.Helper()
	home, err := os.MkdirTemp("", "tgh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.WriteFile(filepath.Join(home, api.TokenFile), []byte(" "+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, cclienttest.ServeOnce(t, filepath.Join(home, api.SocketName), answer)
}

type outcome struct {
	code           int
	stdout, stderr string
}

// run runs bin with args; "HOME" in args is the home. With viaHOME the home
// is found as ~/.toolgate, else through $TOOLGATE_HOME.
func run(t *testing.T, bin, home string, viaHOME bool, args []string) outcome {
	t.Helper()
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = strings.ReplaceAll(a, "HOME", home)
	}
	cmd := exec.Command(bin, words...)
	cmd.Env = []string{"TOOLGATE_HOME=" + home, "HOME=/nonexistent"}
	if viaHOME {
		if err := os.Rename(home, home+"-h"); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(home+"-h", filepath.Join(home, ".toolgate")); err != nil {
			t.Fatal(err)
		}
		cmd.Env = []string{"HOME=" + home}
	}
	code, o, e := cclienttest.Run(t, cmd)
	return outcome{code, o, e}
}

// request is what a server reads of a raw request: all but the order of
// its headers.
type request struct {
	Method, URI, Proto string
	Header             http.Header
	Close              bool
	Body               string
}

func parseRequest(t *testing.T, raw string) request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatalf("request %q: %v", raw, err)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("request %q: %v", raw, err)
	}
	return request{r.Method, r.RequestURI, r.Proto, r.Header, r.Close, string(b)}
}

// ndjson is the head of the daemon's streamed answer: the Go CLI reads
// frames only under this media type (the front reads nothing else).
const ndjson = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"

const execAnswer = ndjson + "Transfer-Encoding: chunked\r\n\r\n" +
	"12\r\n{\"stdout\":\"aGkK\"}\n\r\n16\r\n{\"stderr\":\"ZXJyCg==\"}\n\r\n" +
	"1a\r\n{\"result\":{\"exitCode\":3}}\n\r\n0\r\n\r\n"

// TestFrontMatchesCLI: for every exec command line the front makes itself
// it sends the Go CLI's request — to the byte in the body, the arguments
// as encoding/json writes a map of them — and does with the answer what
// the Go CLI does. It never hands them on (its stand-in would exit 99).
func TestFrontMatchesCLI(t *testing.T) {
	cli, alone := fronts(t)
	for _, tc := range []struct {
		name    string
		args    []string
		viaHOME bool
	}{
		{"argv", []string{"exec", "demo", "--", "true"}, false},
		{"argv without --", []string{"exec", "demo", "ls", "/"}, false},
		{"home flag", []string{"--home", "HOME", "exec", "demo", "--", "sh", "-c", "echo hi"}, false},
		{"home flag after exec", []string{"exec", "--home=HOME", "demo", "--", "true"}, false},
		{"home from HOME", []string{"exec", "demo", "--", "true"}, true},
		{"flags anywhere", []string{"exec", "--cwd", "sub dir", "demo", "--timeout=5s", "--", "ls", "-la"}, false},
		{"flag values look like flags", []string{"exec", "demo", "--cwd", "--", "--timeout", "-c", "--", "x"}, false},
		{"shell", []string{"exec", "demo", "-c", "echo $PWD && ls | wc -l"}, false},
		{"shell glued", []string{"exec", "demo", "-cecho x", "--cwd="}, false},
		{"shell with =", []string{"exec", "demo", "-c=echo x", "--command", "echo y"}, false},
		{"shell wins over argv", []string{"exec", "demo", "--command=id", "--", "true"}, false},
		{"empty shell is none", []string{"exec", "demo", "-c", "", "--", "true"}, false},
		{"a lone dash is a word", []string{"exec", "demo", "cat", "-"}, false},
		{"awkward words", []string{"exec", "demo", "--", "a b", `"q"\`, "<&>", "\u2028\u2029", "\x01\x7f\b\f\n\r\t",
			"a\xffb\xc3", "é😀", "", "-x", "--", "--home"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			homeF, gotF := adminHome(t, execAnswer)
			fc := run(t, filepath.Join(alone, "toolgate"), homeF, tc.viaHOME, tc.args)
			homeG, gotG := adminHome(t, execAnswer)
			goCLI := run(t, filepath.Join(cli, front.CLIBinary), homeG, tc.viaHOME, tc.args)
			want := outcome{3, "hi\n", "err\n"}
			if goCLI != want {
				t.Fatalf("the Go CLI: %+v, want %+v", goCLI, want)
			}
			if fc != want {
				t.Fatalf("the front: %+v, want %+v", fc, want)
			}
			if f, g := parseRequest(t, <-gotF), parseRequest(t, <-gotG); !reflect.DeepEqual(f, g) {
				t.Fatalf("the front's request\n%+v\nthe Go CLI's\n%+v", f, g)
			}
		})
	}
}

// TestFrontAnswersAsCLI: whatever the daemon answers an exec, the front
// exits as the Go CLI does, and where the daemon keeps to its protocol,
// says the same. A daemon that breaks it (a cut stream, a bad frame) is
// told in the launcher's words, with the Go CLI's exit status.
func TestFrontAnswersAsCLI(t *testing.T) {
	cli, alone := fronts(t)
	for _, tc := range []struct {
		name, answer string
		code         int
		same         bool // stdout and stderr too
	}{
		{"output and exit code", execAnswer, 3, true},
		{"success", ndjson + "Content-Length: 26\r\n\r\n{\"result\":{\"exitCode\":0}}\n", 0, true},
		{"keys fold case", ndjson + "\r\n{\"STDOUT\":\"YQ==\",\"x\":[1,{\"y\":true}]}\n{}\n{\"Result\":{\"ExitCode\":5}}\n", 5, true},
		{"denied", "HTTP/1.1 403 Forbidden\r\n\r\n{\"error\":{\"code\":\"denied\",\"rule\":\"r\",\"message\":\"no\",\"id\":\"x\"}}", 126, true},
		{"unauthorized", "HTTP/1.1 401 Unauthorized\r\n\r\n{\"error\":{\"code\":\"unauthorized\",\"message\":\"invalid, expired or revoked token\"}}", 126, true},
		{"unknown agent", "HTTP/1.1 404 Not Found\r\n\r\n{\"error\":{\"code\":\"not_found\",\"rule\":\"agent.unknown\",\"message\":\"unknown agent \\\"x\\\"\"}}", 125, true},
		{"audit down", "HTTP/1.1 503 Service Unavailable\r\n\r\n{\"error\":{\"code\":\"audit_unavailable\",\"message\":\"m\"}}", 125, true},
		{"error frame denied", ndjson + "\r\n{\"stdout\":\"YQ==\"}\n{\"error\":{\"code\":\"denied\",\"message\":\"x\\u00e9\"}}\n", 126, true},
		{"error frame", ndjson + "\r\n{\"error\":{\"code\":\"tool_error\",\"message\":\"sandbox gone\"}}\n", 125, true},
		{"result error", ndjson + "\r\n{\"stderr\":\"eA==\"}\n{\"result\":{\"error\":\"boom\"}}\n", 125, true},
		{"result error and code", ndjson + "\r\n{\"result\":{\"error\":\"timed out after 1s\",\"exitCode\":124}}\n", 124, true},
		{"not json", "HTTP/1.1 500 Internal Server Error\r\n\r\nnot json \n", 125, false},
		{"cut mid-call", ndjson + "Transfer-Encoding: chunked\r\n\r\n12\r\n{\"stdout\":\"aGkK\"}\n\r\n", 125, false},
		{"ends without result", ndjson + "\r\n{\"stdout\":\"aGkK\"}\n", 125, false},
		{"bad frame", ndjson + "\r\n{\"stdout\":5}\n", 125, false},
		{"garbage", "garbage\x01\n", 125, false},
		{"nothing", "", 125, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"exec", "demo", "--", "true"}
			homeF, _ := adminHome(t, tc.answer)
			fc := run(t, filepath.Join(alone, "toolgate"), homeF, false, args)
			homeG, _ := adminHome(t, tc.answer)
			goCLI := run(t, filepath.Join(cli, front.CLIBinary), homeG, false, args)
			if goCLI.code != tc.code || fc.code != tc.code {
				t.Fatalf("exit status: the Go CLI %d, the front %d, want %d\nGo CLI: %q\nfront:  %q", goCLI.code, fc.code, tc.code, goCLI.stderr, fc.stderr)
			}
			if tc.same && fc != goCLI {
				t.Fatalf("the front: %+v\nthe Go CLI: %+v", fc, goCLI)
			}
			if !tc.same && (!strings.HasPrefix(fc.stderr, "toolgate: ") || !strings.HasPrefix(goCLI.stderr, "toolgate: ")) {
				t.Fatalf("no message: the front %q, the Go CLI %q", fc.stderr, goCLI.stderr)
			}
		})
	}
}

// TestFrontHandsOn: every other command line reaches toolgate-cli exactly
// as given, with nothing sent to the daemon first — one the front cannot
// read wholly (other flags, a usage mistake), and an exec it cannot start.
func TestFrontHandsOn(t *testing.T) {
	_, alone := fronts(t)
	for _, tc := range []struct {
		name  string
		args  []string
		setup func(t *testing.T, home string) []string // the environment, when not the default
	}{
		{"no command", nil, nil},
		{"another command", []string{"agents"}, nil},
		{"help", []string{"--help"}, nil},
		{"exec help", []string{"exec", "--help"}, nil},
		{"stdin", []string{"exec", "demo", "-i", "--", "cat"}, nil},
		{"env", []string{"exec", "demo", "-e", "A=B", "--", "env"}, nil},
		{"secret env", []string{"exec", "demo", "--secret-env=A=s", "--", "env"}, nil},
		{"combined short flags", []string{"exec", "demo", "-ic", "cat"}, nil},
		{"context", []string{"--context", "k", "exec", "demo", "--", "true"}, nil},
		{"config", []string{"exec", "demo", "--config=x", "--", "true"}, nil},
		{"exec flag before exec", []string{"--cwd", "x", "exec", "demo", "--", "true"}, nil},
		{"flag without its value", []string{"exec", "demo", "--", "true", "--cwd"}, nil}, // after --: a word, so this one is made
		{"missing value", []string{"exec", "demo", "true", "--timeout"}, nil},
		{"no agent", []string{"exec"}, nil},
		{"no command to run", []string{"exec", "demo"}, nil},
		{"only an empty shell", []string{"exec", "demo", "-c", ""}, nil},
		{"words before exec", []string{"--", "exec", "demo", "true"}, nil},
		{"agent to escape", []string{"exec", "a/b", "--", "true"}, nil},
		{"agent dot", []string{"exec", "..", "--", "true"}, nil},
		{"no token", []string{"exec", "demo", "--", "true"}, func(t *testing.T, home string) []string {
			os.Remove(filepath.Join(home, api.TokenFile))
			return []string{"TOOLGATE_HOME=" + home}
		}},
		{"empty token", []string{"exec", "demo", "--", "true"}, func(t *testing.T, home string) []string {
			os.WriteFile(filepath.Join(home, api.TokenFile), []byte(" \n"), 0o600)
			return []string{"TOOLGATE_HOME=" + home}
		}},
		{"token a header cannot hold", []string{"exec", "demo", "--", "true"}, func(t *testing.T, home string) []string {
			os.WriteFile(filepath.Join(home, api.TokenFile), []byte("a\rb"), 0o600)
			return []string{"TOOLGATE_HOME=" + home}
		}},
		{"no daemon", []string{"exec", "demo", "--", "true"}, func(t *testing.T, home string) []string {
			os.Remove(filepath.Join(home, api.SocketName))
			return []string{"TOOLGATE_HOME=" + home}
		}},
		{"no home at all", []string{"exec", "demo", "--", "true"}, func(t *testing.T, home string) []string { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, got := adminHome(t, execAnswer)
			env := []string{"TOOLGATE_HOME=" + home}
			if tc.setup != nil {
				env = tc.setup(t, home)
			}
			cmd := exec.Command(filepath.Join(alone, "toolgate"), tc.args...)
			cmd.Env = env
			code, o, e := cclienttest.Run(t, cmd)
			if tc.name == "flag without its value" {
				if code != 3 {
					t.Fatalf("exit %d, %q", code, e)
				}
				<-got
				return
			}
			want := ""
			for _, a := range tc.args {
				want += a + "\x00"
			}
			if code != 99 || o != want {
				t.Fatalf("exit %d, handed on %q (want %q); stderr %q", code, o, want, e)
			}
			select {
			case req := <-got:
				t.Fatalf("the front sent a request before handing on: %q", req)
			default:
			}
		})
	}
}

// Without toolgate-cli beside it, the front says where it looked.
func TestFrontWithoutCLI(t *testing.T) {
	_, alone := fronts(t)
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(alone, "toolgate"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "toolgate")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	code, o, e := cclienttest.Run(t, exec.Command(bin, "agents"))
	want := "toolgate: running toolgate-cli, installed beside toolgate (" + filepath.Join(dir, front.CLIBinary) + "): no such file or directory\n"
	if code != 125 || o != "" || e != want {
		t.Fatalf("exit %d, %q %q; want 125, %q", code, o, e, want)
	}
}
