package client

import (
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
	"syscall"
	"time"

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
	cancel  <-chan struct{}  // closed: kill the group (the caller is gone)
}

// runCall starts the call's argv as the leader of a new process group,
// records the group under its call id, waits for the leader and then kills
// the group. Messages go to stderr. It returns the exit code.
func runCall(c *callSpec, stderr io.Writer) int {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdio[0], c.stdio[1], c.stdio[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "toolgate-client run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	pgid := cmd.Process.Pid
	if c.callID != "" {
		f := filepath.Join(callsDir, c.callID)
		if err := writeFile(f, strconv.Itoa(pgid)); err != nil {
			fmt.Fprintf(stderr, "toolgate-client run: recording call: %v\n", err)
		} else {
			defer os.Remove(f)
		}
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var expired <-chan time.Time
	if c.timeout > 0 {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case err := <-done:
			killGroup(pgid)
			return exitCode(cmd, err)
		case <-expired:
			killGroup(pgid)
			<-done
			fmt.Fprintf(stderr, "toolgate: command timed out after %s; its process group was killed\n", c.timeout)
			return ExitTimeout
		case <-c.cancel:
			killGroup(pgid)
			return exitCode(cmd, <-done)
		case s := <-c.signals:
			_ = syscall.Kill(-pgid, s.(syscall.Signal))
		}
	}
}

// killGroup kills a call's process group and waits, briefly, until init has
// reaped every member (a killed member stays in the group as a zombie until
// then), so a call that returns has no process left behind it.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
}

func exitCode(cmd *exec.Cmd, err error) int {
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
	if err != nil {
		return 1
	}
	return 0
}

// cmdKill kills the process group recorded for a call. A call that already
// ended is not an error: the caller only wants it gone.
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
	b, err := os.ReadFile(filepath.Join(callsDir, *callID))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolgate-client kill: %v\n", err)
		return 1
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pgid <= 1 {
		fmt.Fprintf(stderr, "toolgate-client kill: bad process group record %q\n", b)
		return 1
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(stderr, "toolgate-client kill: %v\n", err)
		return 1
	}
	return 0
}

// writeFile writes via a temp file and rename so kill never reads a torn record.
func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
