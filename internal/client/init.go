package client

import (
	"io"
	"os"
	"os/signal"
	"syscall"
)

// cmdInit is PID 1. Orphans of every exec are reparented to it, so it reaps;
// a PID 1 ignores signals it has no handler for, so it forwards SIGTERM to
// everything and exits, which lets `docker stop` end the sandbox at once.
// With egress it also serves the sandbox's HTTP proxy.
func cmdInit(_ []string, stderr io.Writer) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	startForwarder(stderr)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		_ = syscall.Kill(-1, syscall.SIGTERM)
		return 0
	}
	return 0
}

func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
