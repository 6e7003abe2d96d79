package guest

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/toolgate/toolgate/internal/proto/cclient/cclienttest"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as toolgate-client so run/kill are tested as the
// separate processes they are in a sandbox.
func TestMain(m *testing.M) {
	if dir := os.Getenv("TOOLGATE_CLIENT_TEST_CALLS"); dir != "" {
		callsDir = dir
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func client(t *testing.T, calls string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TOOLGATE_CLIENT_TEST_CALLS="+calls)
	return cmd
}

func runClient(t *testing.T, calls string, args ...string) (int, string, string) {
	t.Helper()
	return cclienttest.Run(t, client(t, calls, args...))
}

func TestRun(t *testing.T) {
	calls := t.TempDir()
	plain := filepath.Join(t.TempDir(), "notes.txt") // a file without the execute bit
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"exit code", []string{"run", "--", "sh", "-c", "echo hi; exit 7"}, 7, "hi\n", ""},
		{"killed by signal", []string{"run", "--", "sh", "-c", "kill -9 $$"}, 137, "", ""},
		{"timeout", []string{"run", "--timeout", "200ms", "--call", "t1", "--", "sh", "-c", "sleep 100 & sleep 100"}, 124, "", "timed out after 200ms"},
		{"not found", []string{"run", "--", "/no/such/cmd"}, 127, "", "no such file"},
		{"cwd missing", []string{"run", "--cwd", "/no/such/dir", "--", "true"}, 126, "", "chdir /no/such/dir: no such file or directory"},
		{"cwd a file", []string{"run", "--cwd", "/dev/null", "--", "true"}, 126, "", "chdir /dev/null: not a directory"},
		{"cwd fine, command missing", []string{"run", "--cwd", "/", "--", "/no/such/cmd"}, 127, "", "toolgate-client run: exec /no/such/cmd: no such file or directory\n"},
		{"a directory", []string{"run", "--", calls}, 126, "", "toolgate-client run: exec " + calls + ": is a directory\n"},
		{"not executable", []string{"run", "--", plain}, 126, "", "toolgate-client run: exec " + plain + ": permission denied\n"},
		{"no argv", []string{"run", "--timeout", "1s"}, 2, "", "no command"},
		{"cwd and env", []string{"run", "--cwd", "/", "--env", "TG_A=1", "--env", "TG_B=x=y", "--", "sh", "-c", "echo $PWD $TG_A $TG_B"}, 0, "/ 1 x=y\n", ""},
		{"env without =", []string{"run", "--env", "TG_A", "--", "true"}, 2, "", "want KEY=VALUE"},
		{"env empty key", []string{"run", "--env", "=x", "--", "true"}, 2, "", "want KEY=VALUE"},
		{"bad call id", []string{"run", "--call", "../x", "--", "true"}, 2, "", "invalid call id"},
		{"kill bad id", []string{"kill", "--call", "a/b"}, 2, "", "invalid call id"},
		{"unknown command", []string{"frobnicate"}, 2, "", "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runClient(t, calls, tt.args...)
			if code != tt.code || out != tt.stdout || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("got %d %q %q, want %d %q ~%q", code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
	if left, _ := os.ReadDir(calls); len(left) != 0 {
		t.Errorf("call records left behind: %v", left)
	}
}

// TestKillEndsGroup starts a call whose child forks a grandchild, kills the
// call by id and checks both are gone.
func TestKillEndsGroup(t *testing.T) {
	calls, work := t.TempDir(), t.TempDir()
	pidFile := filepath.Join(work, "bg.pid")
	cmd := client(t, calls, "run", "--call", "k1", "--", "sh", "-c", "sleep 100 & echo $! > "+pidFile+"; sleep 100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the record and the background pid (bounded by the go test timeout).
	var bg int
	for bg == 0 {
		time.Sleep(5 * time.Millisecond)
		if _, err := os.Lstat(filepath.Join(calls, "k1")); err != nil {
			continue
		}
		b, _ := os.ReadFile(pidFile)
		bg, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if code, _, e := runClient(t, calls, "kill", "--call", "k1"); code != 0 {
		t.Fatalf("kill: %d %s", code, e)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 137 {
		t.Fatalf("run exit %d (%v), want 137", code, err)
	}
	if alive(bg) {
		t.Fatalf("background process %d survived the kill", bg)
	}
}

// alive reports whether pid is still a live process (zombies count as dead).
// A SIGKILLed process may take a moment to become a zombie, so it looks again.
func alive(pid int) bool {
	for range 1000 {
		time.Sleep(time.Millisecond)
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			return false
		}
	}
	return true
}

// TestKillBeforeRun is a kill that comes before its call's run recorded
// the process group (an Engine exec still starting): it leaves a tombstone,
// and the run it was meant for never starts its command.
func TestKillBeforeRun(t *testing.T) {
	calls, work := t.TempDir(), t.TempDir()
	if code, _, e := runClient(t, calls, "kill", "--call", "early"); code != 0 {
		t.Fatalf("kill: %d %s", code, e)
	}
	ran := filepath.Join(work, "ran")
	code, _, e := runClient(t, calls, "run", "--timeout", "10s", "--call", "early", "--", "sh", "-c", "touch "+ran+"; sleep 100")
	if code != 137 || !strings.Contains(e, "killed before it started") {
		t.Fatalf("run after its kill: exit %d, %q; want 137", code, e)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed call ran: %v", err)
	}
	if left, _ := os.ReadDir(calls); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	// The tombstone was for that call only: the next one runs.
	if code, _, e := runClient(t, calls, "run", "--call", "next", "--", "true"); code != 0 {
		t.Fatalf("next call: %d %s", code, e)
	}
}

// TestKillRacesRun kills calls while their run is starting them, in
// whatever order the two happen to go: every call ends killed, none runs
// on to its timeout.
func TestKillRacesRun(t *testing.T) {
	old := callsDir
	callsDir = t.TempDir()
	t.Cleanup(func() { callsDir = old })
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for i := range 40 {
		id := "race-" + strconv.Itoa(i)
		codes := make(chan int, 1)
		go func() {
			codes <- runCall(&callSpec{argv: []string{"sleep", "100"}, stdio: [3]*os.File{null, null, null}, timeout: 20 * time.Second, callID: id}, io.Discard)
		}()
		if i%2 == 1 {
			time.Sleep(time.Duration(i) * 100 * time.Microsecond)
		}
		if code := cmdKill([]string{"--call", id}, io.Discard); code != 0 {
			t.Fatalf("kill %s: %d", id, code)
		}
		t0 := time.Now()
		if code := <-codes; code != 137 {
			t.Fatalf("call %s: exit %d, want 137 (killed)", id, code)
		}
		// A kill that found only the tombstone once waited out killGroup
		// for the leader's zombie that only the call's own wait reaps.
		if d := time.Since(t0); d >= reapWait {
			t.Errorf("call %s took %v to end after its kill: it waited for its own zombie", id, d)
		}
	}
	left, _ := os.ReadDir(callsDir)
	for _, e := range left {
		if !strings.HasSuffix(e.Name(), tombstoneSuffix) {
			t.Errorf("record left behind: %s", e.Name())
		}
	}
}

// TestTombstonesPruned: a kill of a call that had already ended leaves a
// tombstone no run takes; a later kill removes it once it is old.
func TestTombstonesPruned(t *testing.T) {
	old := callsDir
	callsDir = t.TempDir()
	t.Cleanup(func() { callsDir = old })
	if code := cmdKill([]string{"--call", "gone"}, io.Discard); code != 0 {
		t.Fatalf("kill of an ended call: %d", code)
	}
	stone := filepath.Join(callsDir, "gone"+tombstoneSuffix)
	pruneTombstones(time.Now().Add(-tombstoneAge)) // what the next kill does
	if _, err := os.Lstat(stone); err != nil {
		t.Fatalf("a fresh tombstone was pruned: %v", err)
	}
	pruneTombstones(time.Now().Add(time.Second)) // as the next kill does once it is old
	if _, err := os.Lstat(stone); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old tombstone kept: %v", err)
	}
}

// TestWaitLeader: the leader's status as a shell would report it, read
// through its pidfd in the poller — not by os/exec's blocking Wait, which
// would leave cmd.ProcessState set — and by Wait when there is no pidfd.
func TestWaitLeader(t *testing.T) {
	tests := []struct {
		name   string
		script string
		code   int
	}{
		{"exit 0", "exit 0", 0},
		{"exit 3", "exit 3", 3},
		{"exit 255", "exit 255", 255},
		{"SIGTERM", "kill -TERM $$", 143},
		{"SIGKILL", "kill -KILL $$", 137},
		{"SIGABRT, core", "ulimit -c 0; kill -ABRT $$", 134},
		{"after a while", "sleep 0.05; exit 5", 5},
	}
	for _, tt := range tests {
		for _, pidfd := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s pidfd=%v", tt.name, pidfd), func(t *testing.T) {
				cmd := exec.Command("sh", "-c", tt.script)
				fd := -1
				if pidfd {
					cmd.SysProcAttr = &syscall.SysProcAttr{PidFD: &fd}
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				if pidfd && fd < 0 {
					t.Fatal("no pidfd from the kernel")
				}
				pid := cmd.Process.Pid // Release, after a pidfd wait, makes it -1
				ws, err := waitLeader(cmd, fd)
				if err != nil {
					t.Fatal(err)
				}
				code := ws.ExitStatus()
				if ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
				if code != tt.code {
					t.Errorf("code %d, want %d", code, tt.code)
				}
				if waited := cmd.ProcessState != nil; waited == pidfd {
					t.Errorf("waited by os/exec: %v, want %v", waited, !pidfd)
				}
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("leader not reaped: kill 0 gave %v", err)
				}
			})
		}
	}
}
