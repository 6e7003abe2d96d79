package guest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/toolgate/toolgate/internal/proto"
)

// ExitTimeout is the exit code of a call whose timeout was reached (as timeout(1)).
const ExitTimeout = 124

// callsDir is a variable so tests can run outside a sandbox.
var callsDir = proto.CallsDir

// cmdRun starts argv as the leader of a new process group, records the
// group so `kill --call` can end it, and waits. On timeout the whole group
// is killed. When the leader ends, whatever it left in its group is killed
// too: a call owns its process tree, and a background child holding the
// output pipes would otherwise keep the call open.
func cmdRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 0, "kill the process group after this long (0: never)")
	callID := fs.String("call", "", "call id, names the process group for kill")
	// A backend whose exec API sets neither (Kubernetes' pods/exec) passes
	// the call's directory and environment here.
	cwd := fs.String("cwd", "", "run in this directory")
	var env envFlag
	fs.Var(&env, "env", "KEY=VALUE added to the environment (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "toolgate-client run: no command given")
		return 2
	}
	if *callID != "" && !proto.ValidCallID(*callID) {
		fmt.Fprintf(stderr, "toolgate-client run: invalid call id %q\n", *callID)
		return 2
	}

	// Signals aimed at this wrapper (exec kill, docker stop) go to the group.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	c := &callSpec{
		argv: argv, dir: *cwd, stdio: [3]*os.File{os.Stdin, os.Stdout, os.Stderr},
		timeout: *timeout, callID: *callID, signals: sigs,
	}
	if len(env) > 0 {
		c.env = append(os.Environ(), env...)
	}
	return runCall(c, stderr)
}

// envFlag collects repeated --env KEY=VALUE.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }

func (e *envFlag) Set(kv string) error {
	if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", kv)
	}
	*e = append(*e, kv)
	return nil
}

// callSpec is one call for runCall: `run` and the executor share it.
type callSpec struct {
	argv    []string
	dir     string   // "": this process's
	env     []string // nil: this process's
	stdio   [3]*os.File
	timeout time.Duration
	callID  string
	signals <-chan os.Signal // forwarded to the group
	cancel  context.Context  // done: kill the group (the caller is gone); nil: never
}

// runCall starts the call's argv as the leader of a new process group,
// records the group under its call id, waits for the leader and then kills
// the group. Messages go to stderr. It returns the exit code.
func runCall(c *callSpec, stderr io.Writer) int {
	if killedBeforeStart(c, stderr) {
		return exitKilled
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdio[0], c.stdio[1], c.stdio[2]
	pidfd := -1
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, PidFD: &pidfd}
	if err := cmd.Start(); err != nil {
		if derr := unusableDir(c.dir); derr != nil {
			fmt.Fprintf(stderr, "toolgate-client run: %v\n", derr)
			return 126
		}
		fmt.Fprintf(stderr, "toolgate-client run: %v\n", startErr(err))
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	pgid := cmd.Process.Pid
	if c.callID != "" {
		if err := recordCall(c.callID, pgid); err != nil {
			fmt.Fprintf(stderr, "toolgate-client run: recording call: %v\n", err)
		} else {
			defer os.Remove(filepath.Join(callsDir, c.callID))
		}
		// A kill that came between the check above and the record found
		// neither: its tombstone is here now. The group is killed, not
		// waited for: its leader stays in it, a zombie, until the wait
		// below reaps it (killGroup would have waited 2 s for that).
		if takeTombstone(c.callID) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}

	// The leader is waited for here; what ends the group early (its
	// timeout, the caller going away) does so from a callback, and
	// signals are forwarded by a goroutine only when there are any: a
	// call costs no goroutine and no wake-up beyond its own wait.
	var expired atomic.Bool
	if c.timeout > 0 {
		t := time.AfterFunc(c.timeout, func() {
			expired.Store(true)
			killGroup(pgid)
		})
		defer t.Stop()
	}
	if c.cancel != nil {
		defer context.AfterFunc(c.cancel, func() { killGroup(pgid) })()
	}
	if c.signals != nil {
		waited := make(chan struct{})
		defer close(waited)
		go func() {
			for {
				select {
				case s := <-c.signals:
					_ = syscall.Kill(-pgid, s.(syscall.Signal))
				case <-waited:
					return
				}
			}
		}()
	}
	ws, err := waitLeader(cmd, pidfd)
	killGroup(pgid)
	if expired.Load() {
		fmt.Fprintf(stderr, "toolgate: command timed out after %s; its process group was killed\n", c.timeout)
		return ExitTimeout
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolgate-client run: %v\n", err)
		return 1
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// startErr is a failed start in a shell's words: os/exec names the step
// that failed ("fork/exec /x: permission denied"), and a directory is
// refused with EACCES, which reads as a permissions problem.
func startErr(err error) error {
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "fork/exec" {
		return err
	}
	why := pe.Err
	if fi, serr := os.Stat(pe.Path); errors.Is(why, syscall.EACCES) && serr == nil && fi.IsDir() {
		why = syscall.EISDIR
	}
	return &os.PathError{Op: "exec", Path: pe.Path, Err: why}
}

// unusableDir says why a call cannot run in dir ("": it runs in this
// process's): the child's chdir failing is reported by os/exec as the
// program's own error ("fork/exec /bin/pwd: no such file or directory"),
// which would send whoever reads it after the wrong thing. Asked only once
// a start failed.
func unusableDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	var pe *os.PathError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case err == nil && !fi.IsDir():
		err = syscall.ENOTDIR
	case err == nil:
		err = syscall.Access(dir, 1) // X_OK: the search permission chdir needs
	}
	if err != nil {
		return &os.PathError{Op: "chdir", Path: dir, Err: err}
	}
	return nil
}

// waitLeader waits for cmd's process, which has only files for stdio (no
// copying goroutine waits with it), and reaps it. With its pidfd the wait
// is the runtime poller's: the goroutine parks and no thread sits in
// waitid. A thread blocked there holds its P until sysmon takes it back:
// with the executor's one P (setExecutorProcs) every other call would
// wait for that, and with two, sysmon kept waking every 20 µs to do it
// (~10% of the executor's CPU under 64 calls at once).
func waitLeader(cmd *exec.Cmd, pidfd int) (syscall.WaitStatus, error) {
	if pidfd < 0 { // a kernel without pidfds
		return waitCmd(cmd)
	}
	// Non-blocking before os.NewFile: only then does it go in the poller.
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		syscall.Close(pidfd)
		return waitCmd(cmd)
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	var ws syscall.WaitStatus
	var werr error
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool {
			var exited bool
			exited, ws, werr = waitidPidfd(int(fd))
			return exited || werr != nil
		})
	}
	if err != nil { // not in the poller after all: let os wait in the kernel
		_ = syscall.SetNonblock(pidfd, false) // os's copy shares the flag
		return waitCmd(cmd)
	}
	cmd.Process.Release() // os's own copy of the pidfd: the child is reaped
	return ws, werr
}

// waitCmd waits for cmd the usual way, a thread blocked in the kernel.
func waitCmd(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		return ws, nil
	}
	return 0, err
}

// siginfoChild is the head of the siginfo_t waitid fills for a child.
type siginfoChild struct {
	signo, errno, code int32
	_                  int32
	pid                int32
	uid                uint32
	status             int32
	_                  [100]byte // siginfo_t is 128 bytes
}

// waitidPidfd reaps the process behind pidfd if it has ended (exited
// true) and returns its status as wait4 would.
func waitidPidfd(pidfd int) (exited bool, ws syscall.WaitStatus, err error) {
	const pPidfd, cldExited, cldKilled, cldDumped = 3, 1, 2, 3
	var info siginfoChild
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPidfd, uintptr(pidfd),
		uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOHANG, 0, 0)
	switch {
	case e == syscall.EINTR || e == syscall.EAGAIN:
		return false, 0, nil
	case e != 0:
		return false, 0, os.NewSyscallError("waitid", e)
	case info.pid == 0: // WNOHANG: not yet
		return false, 0, nil
	}
	switch info.code {
	case cldExited:
		ws = syscall.WaitStatus(info.status&0xff) << 8
	case cldKilled:
		ws = syscall.WaitStatus(info.status & 0x7f)
	case cldDumped:
		ws = syscall.WaitStatus(info.status&0x7f) | 0x80
	}
	return true, ws, nil
}

// killedBeforeStart reports, on stderr too, whether a kill for c's call id
// came before the call started (it must then not start).
func killedBeforeStart(c *callSpec, stderr io.Writer) bool {
	if c.callID != "" && takeTombstone(c.callID) {
		fmt.Fprintf(stderr, "toolgate-client run: call %s was killed before it started\n", c.callID)
		return true
	}
	return false
}

// exitKilled is the exit code of a call killed before it started, as of
// one killed by SIGKILL.
const exitKilled = 128 + int(syscall.SIGKILL)

// A call's record in callsDir is a symlink named for its id whose target is
// its process group: made in one syscall, so a kill never reads a torn
// record (and, on tmpfs, an inode without a page). A kill that finds no
// record leaves a tombstone, ID+tombstoneSuffix (no valid id has a dot),
// which run checks before it starts the call and again once it recorded
// it: the kill reads the record after it left the tombstone, run checks
// the tombstone after it wrote the record, so one of them sees the other
// and a call cancelled while its run was starting still dies.
const tombstoneSuffix = ".killed"

// tombstoneAge is how long a tombstone waits for its run: one left for a
// call that had already ended is removed by a later kill after this.
const tombstoneAge = 10 * time.Minute

// recordCall records pgid under id.
func recordCall(id string, pgid int) error {
	return symlinkIn(strconv.Itoa(pgid), id)
}

// symlinkIn makes callsDir/name point at target, making callsDir first
// when it is not there yet.
func symlinkIn(target, name string) error {
	p := filepath.Join(callsDir, name)
	err := os.Symlink(target, p)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(callsDir, 0o700); err == nil {
			err = os.Symlink(target, p)
		}
	}
	return err
}

// takeTombstone reports whether a kill left a tombstone for id, and
// removes it.
func takeTombstone(id string) bool {
	// Unlink alone: os.Remove would try rmdir too on every call without one.
	return syscall.Unlink(filepath.Join(callsDir, id+tombstoneSuffix)) == nil
}

// reapWait is how long killGroup waits for the group's members to be reaped.
const reapWait = 2 * time.Second

// killGroup kills a call's process group and waits, briefly, until init has
// reaped every member (a killed member stays in the group as a zombie until
// then), so a call that returns has no process left behind it. A group
// already empty, as after most calls, costs one syscall.
func killGroup(pgid int) {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
		return // no member left, not even a zombie
	}
	// Reaping takes init a moment: look again soon, then less often.
	deadline := time.Now().Add(reapWait)
	for wait := 100 * time.Microsecond; time.Now().Before(deadline); wait = min(2*wait, 2*time.Millisecond) {
		time.Sleep(wait)
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
}

// cmdKill kills the process group recorded for a call. A call that already
// ended is not an error: the caller only wants it gone. A call not recorded
// yet gets a tombstone, so its run does not go on with it.
func cmdKill(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("kill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	callID := fs.String("call", "", "call id given to run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !proto.ValidCallID(*callID) {
		fmt.Fprintf(stderr, "toolgate-client kill: invalid call id %q\n", *callID)
		return 2
	}
	pgid, err := recordedGroup(*callID)
	if errors.Is(err, os.ErrNotExist) {
		pruneTombstones(time.Now().Add(-tombstoneAge))
		if err = symlinkIn("killed", *callID+tombstoneSuffix); err != nil && !errors.Is(err, os.ErrExist) {
			fmt.Fprintf(stderr, "toolgate-client kill: leaving a tombstone: %v\n", err)
			return 1
		}
		// A run that recorded its call meanwhile may have checked for the
		// tombstone before it was there: this kill must see its record.
		if pgid, err = recordedGroup(*callID); err == nil {
			_ = os.Remove(filepath.Join(callsDir, *callID+tombstoneSuffix))
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolgate-client kill: %v\n", err)
		return 1
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(stderr, "toolgate-client kill: %v\n", err)
		return 1
	}
	return 0
}

// recordedGroup is the process group recorded for id; an error wrapping
// os.ErrNotExist when there is none.
func recordedGroup(id string) (int, error) {
	target, err := os.Readlink(filepath.Join(callsDir, id))
	if err != nil {
		return 0, err
	}
	pgid, err := strconv.Atoi(target)
	if err != nil || pgid <= 1 {
		return 0, fmt.Errorf("bad process group record %q", target)
	}
	return pgid, nil
}

// pruneTombstones removes the tombstones left before cutoff: their calls
// had ended before the kill came, or never started.
func pruneTombstones(cutoff time.Time) {
	entries, _ := os.ReadDir(callsDir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), tombstoneSuffix) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			_ = os.Remove(filepath.Join(callsDir, e.Name()))
		}
	}
}
