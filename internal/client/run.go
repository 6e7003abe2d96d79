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

	"github.com/toolgate/toolgate/internal/sandbox"
)

// ExitTimeout is the exit code of a call whose timeout was reached (as timeout(1)).
const ExitTimeout = 124

// callsDir is a variable so tests can run outside a sandbox.
var callsDir = sandbox.CallsDir

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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "toolgate-client run: no command given")
		return 2
	}
	if *callID != "" && !sandbox.ValidCallID(*callID) {
		fmt.Fprintf(stderr, "toolgate-client run: invalid call id %q\n", *callID)
		return 2
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Signals aimed at this wrapper (exec kill, docker stop) go to the group.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "toolgate-client run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	pgid := cmd.Process.Pid
	if *callID != "" {
		f := filepath.Join(callsDir, *callID)
		if err := writeFile(f, strconv.Itoa(pgid)); err != nil {
			fmt.Fprintf(stderr, "toolgate-client run: recording call: %v\n", err)
		} else {
			defer os.Remove(f)
		}
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var expired <-chan time.Time
	if *timeout > 0 {
		t := time.NewTimer(*timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case err := <-done:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return exitCode(cmd, err)
		case <-expired:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
			fmt.Fprintf(stderr, "toolgate: command timed out after %s; its process group was killed\n", *timeout)
			return ExitTimeout
		case s := <-sigs:
			_ = syscall.Kill(-pgid, s.(syscall.Signal))
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
	if !sandbox.ValidCallID(*callID) {
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
