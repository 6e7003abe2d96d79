package tmpdir

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary, run again, the owner process of
// TestKilledOwnerSwept: it makes a directory with New, prints its path and
// waits to be killed.
const childEnv = "TOOLGATE_TMPDIR_CHILD"

func TestMain(m *testing.M) {
	if prefix := os.Getenv(childEnv); prefix != "" {
		dir, err := New(prefix)
		if err != nil {
			os.Exit(2)
		}
		if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 1<<20), 0o600); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(dir + "\n")
		time.Sleep(time.Hour) // until killed
	}
	os.Exit(m.Run())
}

// startOwner runs exe (the test binary or a copy of it) as an owner process
// that makes a directory of prefix with New, and returns the process and
// the directory. The process is killed at the test's end.
func startOwner(t *testing.T, exe, prefix string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the owner process printed no directory: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

func needProc(t *testing.T) {
	t.Helper()
	if !procReadable() {
		t.Skip("no /proc: owners cannot be told dead, nothing is swept")
	}
}

// TestKilledOwnerSwept: a test process killed before its clean-up leaves
// its directory; the next New of the prefix removes it, and leaves alone
// the directory of an owner still running.
func TestKilledOwnerSwept(t *testing.T) {
	needProc(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	killed, killedDir := startOwner(t, os.Args[0], "toolgate-bin")
	running, runningDir := startOwner(t, os.Args[0], "toolgate-bin")
	if filepath.Dir(killedDir) != tmp || !strings.HasPrefix(filepath.Base(killedDir), "toolgate-bin-"+strconv.Itoa(killed.Process.Pid)+".") {
		t.Fatalf("owner %d made %s: not named after it under %s", killed.Process.Pid, killedDir, tmp)
	}
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	if _, err := os.Stat(filepath.Join(killedDir, "big")); err != nil {
		t.Fatalf("the killed owner's directory should still be there before a sweep: %v", err)
	}

	mine, err := New("toolgate-bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killedDir); !os.IsNotExist(err) {
		t.Fatalf("New left the killed owner's %s (stat: %v)", killedDir, err)
	}
	if _, err := os.Stat(filepath.Join(runningDir, "big")); err != nil {
		t.Fatalf("New removed the directory of owner %d, still running: %v", running.Process.Pid, err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Fatalf("RemoveAll left %s (stat: %v)", mine, err)
	}
}

// TestSweepNames: only well-formed names of the prefix whose owner is gone
// go; a pid now held by another process (another start time) counts as gone.
func TestSweepNames(t *testing.T) {
	needProc(t)
	dir := t.TempDir()
	me := self()
	pid, _, _ := strings.Cut(me, ".")
	dead := deadPid(t)
	names := map[string]bool{ // name: removed
		"p-" + me + "-a":                        false, // this process
		"p-" + pid + ".1-b":                     true,  // this pid, another start: a dead owner's pid reused
		"p-" + dead + ".5-c":                    true,  // no such process
		"p-" + dead + "-d":                      false, // no start time: not ours
		"p-x" + dead + ".5-e":                   false,
		"p-" + dead + ".5":                      false, // no random part
		"p-extra-" + dead + ".5-f":              false, // prefix p-extra, not p
		"q-" + dead + ".5-g":                    false, // another prefix
		"prefix-" + dead + ".5-h":               false,
		"p-" + dead + ".5-file-not-dir":         true, // a file of a dead owner too
		"p-" + dead + ".5x-i":                   false,
		"p-" + strings.Repeat("9", 30) + ".5-j": true, // a pid beyond any: not running
	}
	for n := range names {
		p := filepath.Join(dir, n)
		var err error
		if strings.HasSuffix(n, "file-not-dir") {
			err = os.WriteFile(p, nil, 0o600)
		} else if err = os.Mkdir(p, 0o700); err == nil {
			err = os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	removed := Sweep(dir, "p")
	var want []string
	for n, gone := range names {
		if gone {
			want = append(want, filepath.Join(dir, n))
		}
		_, err := os.Lstat(filepath.Join(dir, n))
		if gone != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, want %v", n, os.IsNotExist(err), gone)
		}
	}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("Sweep reported %v, want %v", removed, want)
	}
}

// deadPid is the pid of a process that ran and was reaped.
func deadPid(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	if _, err := startTime(pid); err == nil {
		t.Skipf("pid %s was taken again at once", pid)
	}
	return pid
}

func TestNewRefusesPaths(t *testing.T) {
	for _, p := range []string{"", "a/b", "../x", `a\b`} {
		if d, err := New(p); err == nil {
			os.RemoveAll(d)
			t.Errorf("New(%q) = %s, want an error", p, d)
		}
	}
}

func TestFor(t *testing.T) {
	var dir string
	t.Run("owner", func(t *testing.T) {
		dir = For(t)
		if !strings.HasPrefix(filepath.Base(dir), "toolgate-test-"+self()+"-") {
			t.Fatalf("For made %s: not named after this process", dir)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("For's directory outlived its test (stat: %v)", err)
	}
}

func TestStartTimeOfCommandWithParens(t *testing.T) {
	needProc(t)
	// The command name is taken up to the last ')': a name like "a) b (c"
	// would otherwise shift the fields. A copy of the test binary so named
	// shows it: its start time is no earlier than this process's (a field
	// shifted is a thread count or a memory size).
	exe := filepath.Join(t.TempDir(), "a) b (c")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	_, dir := startOwner(t, exe, "paren")
	owner := strings.TrimPrefix(filepath.Base(dir), "paren-")
	owner = owner[:strings.LastIndexByte(owner, '-')]
	if !wellFormed(owner) || !alive(owner) {
		t.Fatalf("owner %q of the process named %q: well-formed %v, alive %v", owner, filepath.Base(exe), wellFormed(owner), alive(owner))
	}
	_, childStart, _ := strings.Cut(owner, ".")
	_, myStart, _ := strings.Cut(self(), ".")
	c, _ := strconv.ParseUint(childStart, 10, 64)
	m, _ := strconv.ParseUint(myStart, 10, 64)
	if c < m {
		t.Fatalf("the process named %q started at %d, before this one (%d): the wrong field", filepath.Base(exe), c, m)
	}
}
