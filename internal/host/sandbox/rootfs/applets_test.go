package rootfs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// TestBusyboxAppletCorpus runs every case of testdata/applets.txt with the
// default image's busybox (musl) and with Debian's busybox-static of the
// same version (glibc, the reference), each in a fresh directory of the
// same files with only the image's applets on PATH, and compares exit
// status, stdout and stderr. No case may end ours by a signal.
func TestBusyboxAppletCorpus(t *testing.T) {
	needBuild(t)
	ref := referenceBusybox(t)
	ours, err := muslBusybox(context.Background(), Env{Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	cases, err := readCorpus("testdata/applets.txt")
	if err != nil {
		t.Fatal(err)
	}
	env := corpusServers(t)
	for _, c := range cases {
		t.Run(fmt.Sprintf("line%d", c.line), func(t *testing.T) {
			t.Parallel()
			o := runCase(t, ours, c.script, env)
			if (o.signal != 0 || o.exit >= 128) && c.kind != "signal" || crashed.MatchString(o.stderr) {
				t.Fatalf("applets.txt:%d %s\nours crashed (exit %d, signal %d, or a fault in its stderr)\nstderr: %s", c.line, c.script, o.exit, o.signal, o.stderr)
			}
			if c.kind == "ours" {
				if o.exit != c.exit {
					t.Errorf("applets.txt:%d %s\nours: exit %d, want %d (%s)\nstdout: %s\nstderr: %s", c.line, c.script, o.exit, c.exit, c.why, o.stdout, o.stderr)
				}
				return
			}
			r := runCase(t, ref, c.script, env)
			var diffs []string
			if o.exit != r.exit || o.signal != r.signal {
				diffs = append(diffs, fmt.Sprintf("exit: ours %d (signal %d), Debian's %d (signal %d)", o.exit, o.signal, r.exit, r.signal))
			}
			if c.kind != "exit" && o.stdout != r.stdout {
				diffs = append(diffs, fmt.Sprintf("stdout:\n ours:     %q\n Debian's: %q", o.stdout, r.stdout))
			}
			if c.kind == "" && o.stderr != r.stderr {
				diffs = append(diffs, fmt.Sprintf("stderr:\n ours:     %q\n Debian's: %q", o.stderr, r.stderr))
			}
			if len(diffs) > 0 {
				t.Errorf("applets.txt:%d %s\n%s", c.line, c.script, strings.Join(diffs, "\n"))
			}
		})
	}
}

// referenceBusybox is Debian's busybox-static when it is the version the
// default image builds; without it the test fails in CI and skips
// elsewhere.
func referenceBusybox(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(BusyboxPath, "--help").Output()
	want := "BusyBox v1.35.0 (Debian 1:" + busyboxSource.Version
	if err == nil && bytes.HasPrefix(out, []byte(want)) {
		return BusyboxPath
	}
	why := fmt.Sprintf("the reference is Debian's busybox-static %s at %s (apt-get install busybox-static): %v %.60q", busyboxSource.Version, BusyboxPath, err, out)
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// corpusCase is one line of the corpus: a script for `sh -c`, and how its
// result is compared. kind "" compares exit status, stdout and stderr;
// "stdout" exit status and stdout; "exit" the exit status; "ours" runs
// only ours, which must exit with exit (Debian's build crashes there, or
// differs by design); "signal" compares everything and lets the script end
// by a signal.
type corpusCase struct {
	line      int
	script    string
	kind, why string
	exit      int
}

// annotation is a case's trailing `#! kind: why` (a shell comment).
var annotation = regexp.MustCompile(`\s+#! (stdout|exit|signal|ours (\d+)): (.+)$`)

func readCorpus(path string) ([]corpusCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cases []corpusCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if more, ok := strings.CutPrefix(line, "> "); ok && len(cases) > 0 {
			cases[len(cases)-1].script += "\n" + more
			continue
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cases = append(cases, corpusCase{line: n, script: line})
	}
	for i := range cases {
		c := &cases[i]
		if m := annotation.FindStringSubmatchIndex(c.script); m != nil {
			c.kind, c.why = c.script[m[2]:m[3]], c.script[m[6]:m[7]]
			if m[4] >= 0 {
				c.kind = "ours"
				c.exit, _ = strconv.Atoi(c.script[m[4]:m[5]])
			}
			c.script = c.script[:m[0]]
		} else if strings.Contains(c.script, "#!") {
			return nil, fmt.Errorf("%s:%d: an annotation is `#! stdout|exit|signal|ours N: why`", path, c.line)
		}
	}
	return cases, sc.Err()
}

// caseResult is what one busybox did with a case, normalized.
type caseResult struct {
	exit, signal   int
	stdout, stderr string
}

// crashed is how sh reports a command a fault killed (strsignal, glibc's
// or musl's words), wherever in the script it ran.
var crashed = regexp.MustCompile(`(?m)^(Segmentation fault|Bus error|Illegal instruction|Floating point exception|Arithmetic exception|Aborted|Bad system call|Trace/breakpoint trap|Breakpoint trap)( \(core dumped\))?$`)

// normalized are the words the two builds differ in by design, each
// replaced by one form: the banner's parenthesis names the build (Debian's
// epoch and binNMU; "musl"), and getopt's complaints are the libc's
// (glibc "invalid option -- 'x'", musl "unrecognized option: x").
var normalized = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`BusyBox v1\.35\.0 \([^)]*\)`), "BusyBox v1.35.0 (build)"},
	{regexp.MustCompile(`(?m)^(\S+): (?:invalid option -- '(.)'|unrecognized option '--([^'=]*)(?:=[^']*)?'|unrecognized option: ([^=\n]*)(?:=.*)?)$`), "$1: bad option $2$3$4"},
	{regexp.MustCompile(`(?m)^(\S+): (?:option requires an argument -- '(.)'|option '--([^']*)' requires an argument|option requires an argument: (.*))$`), "$1: option $2$3$4 needs an argument"},
}

// runCase runs script with bb's sh in a new directory of the corpus
// files, with only bb's applets (the image's) on PATH.
func runCase(t *testing.T, bb, script string, env []string) caseResult {
	t.Helper()
	root := t.TempDir()
	bin, work := filepath.Join(root, "bin"), filepath.Join(root, "w")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bb, filepath.Join(bin, "busybox")); err != nil {
		t.Fatal(err)
	}
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(bin, a)); err != nil {
			t.Fatal(err)
		}
	}
	writeCorpusFiles(t, work)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "sh"), "-c", script)
	cmd.Dir = work
	cmd.Env = append([]string{"PATH=" + bin, "HOME=" + work, "TZ=UTC", "LC_ALL=C", "TERM=dumb"}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a hang is killed with its children
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s with %s: still running after 30 s", script, bb)
	}
	res := caseResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		res.exit, res.signal = ws.ExitStatus(), int(ws.Signal())
		if !ws.Signaled() {
			res.signal = 0
		}
	case err != nil:
		t.Fatal(err)
	}
	for _, s := range []*string{&res.stdout, &res.stderr} {
		*s = strings.ReplaceAll(*s, root, "$ROOT")
		for _, n := range normalized {
			*s = n.re.ReplaceAllString(*s, n.with)
		}
	}
	return res
}

// corpusTime is every corpus file's modification time.
var corpusTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// writeCorpusFiles makes the files the corpus works on in dir.
func writeCorpusFiles(t *testing.T, dir string) {
	t.Helper()
	var binary []byte
	for i := range 256 {
		binary = append(binary, byte(i))
	}
	files := []struct {
		name string
		mode os.FileMode
		body string
	}{
		{"a.txt", 0o644, "alpha\nbeta\ngamma\nalpha\nDelta 42\n"},
		{"nums.txt", 0o644, "10\n9\n100\n-3\n2.5\n9\n"},
		{"data.csv", 0o644, "name,age,city\nann,31,Oslo\nbob,27,Rome\ncid,45,Oslo\n"},
		{"old.txt", 0o644, "one\ntwo\nthree\nfour\n"},
		{"new.txt", 0o644, "one\n2\nthree\nfour\nfive\n"},
		{"spaced name.txt", 0o644, "spaces\n"},
		{"noeol.txt", 0o644, "last line without newline"},
		{"crlf.txt", 0o644, "dos\r\nline\r\n"},
		{"utf8.txt", 0o644, "naïve café\nstraße\n"},
		{"empty", 0o644, ""},
		{"bin.dat", 0o644, string(binary)},
		{"run.sh", 0o755, "#!/bin/sh\necho run.sh \"$@\"\nexit 3\n"},
		{"d/x.txt", 0o644, "x\n"},
		{"d/.hidden", 0o600, "h\n"},
		{"d/sub/y.go", 0o644, "package y\n\nfunc Y() int { return 42 }\n"},
		{"d/sub/z.txt", 0o644, "zed\nalpha\n"},
		{"d/sub/deep/w.md", 0o644, "# W\n"},
	}
	var dirs []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil { // past the umask
			t.Fatal(err)
		}
		for d := filepath.Dir(p); d != filepath.Dir(dir); d = filepath.Dir(d) {
			dirs = append(dirs, d)
		}
		if err := os.Chtimes(p, corpusTime, corpusTime); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs { // deepest first was not needed: children are written already
		if err := os.Chtimes(d, corpusTime, corpusTime); err != nil {
			t.Fatal(err)
		}
	}
}

// corpusServers start what the network cases talk to and return their
// addresses as the cases' environment: SRV an HTTP server, SILENT a port
// that accepts and never answers, ECHO a line echo, CLOSED a port nobody
// listens on.
func corpusServers(t *testing.T) []string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/x", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served /x\n") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.Write(bytes.Repeat([]byte("0123456789abcdef\n")[:10], 10000))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/x", http.StatusFound) })
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s ua=%q type=%q body=%q x=%q\n", r.Method, r.URL.RequestURI(), r.UserAgent(), r.Header.Get("Content-Type"), b, r.Header.Get("X-Test"))
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		// Headers, part of the body, then nothing until the client leaves.
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	silent := listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	echo := listen(t, func(c net.Conn) { io.Copy(c, c) })
	return []string{"SRV=" + srv.URL, "SILENT=" + silent, "ECHO=" + echo,
		"ECHOPORT=" + port(echo), "SILENTPORT=" + port(silent), "CLOSED=127.0.0.1:1"}
}

// listen serves each connection to a loopback port with serve (closing it
// after) and returns the address.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probe.Serve(t, ln, serve)
	return ln.Addr().String()
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
