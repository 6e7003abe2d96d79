package guest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/proto"
)

// A dead executor is restarted after a delay that doubles, up to
// maxExecutorRestart, while it keeps dying young: one that cannot start
// (e.g. an executor directory it may not write) must not spin.
const (
	executorRestart    = 200 * time.Millisecond
	maxExecutorRestart = 30 * time.Second
)

// cmdInit is PID 1. Orphans of every exec are reparented to it, so it reaps;
// a PID 1 ignores signals it has no handler for, so it forwards SIGTERM to
// everything (the executor excepted: it is killed first) and exits, which
// lets `docker stop` end the sandbox at once.
// With egress it also serves the sandbox's HTTP proxy. When the executor
// directory is mounted it keeps `toolgate-client executor` running: a
// separate process, so this reaper never takes its children's statuses.
func cmdInit(_ []string, stderr io.Writer) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	startForwarder(stderr)
	startModelForwarder(stderr)
	executor := 0 // pid; 0: none
	var restart <-chan time.Time
	var started time.Time
	delay := executorRestart
	retry := func() {
		if time.Since(started) > maxExecutorRestart {
			delay = executorRestart // it ran a good while: not a failing start
		}
		restart = time.After(delay)
		delay = min(2*delay, maxExecutorRestart)
	}
	launch := func() {
		restart, started = nil, time.Now()
		if executor = startExecutor(stderr); executor == 0 {
			retry()
		}
	}
	if fi, err := os.Stat(proto.ExecDirPath); err == nil && fi.IsDir() {
		launch()
	}
	for {
		select {
		case <-restart:
			launch()
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				// The executor first, at once: the SIGTERM below ends its
				// calls' commands too, and it must not report their deaths
				// as their own exits (143); with it gone, the gateway sees
				// the sandbox stop under the call.
				if executor > 0 {
					_ = syscall.Kill(executor, syscall.SIGKILL)
				}
				_ = syscall.Kill(-1, syscall.SIGTERM)
				return 0
			}
			if reap(executor) {
				executor = 0
				retry()
			}
		}
	}
}

// startExecutor starts the executor and returns its pid, 0 when it could
// not start.
func startExecutor(stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		self = proto.ClientPath
	}
	cmd := exec.Command(self, "executor")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "toolgate-client init: executor: %v\n", err)
		return 0
	}
	// Never Wait: reap collects it and tells init when it is gone.
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid
}

// reap collects every exited child and reports whether pid (> 0) was one of them.
func reap(pid int) bool {
	found := false
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if p <= 0 || err != nil {
			return found
		}
		found = found || (pid > 0 && p == pid)
	}
}
