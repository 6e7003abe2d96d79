// Package pidlock is a lock held by one process at a time: an flock on a
// file that records the holder's pid, for the message another process
// gives when it finds the lock taken. The lock goes with the process, so a
// crash never leaves it stale; the pid a crashed holder left behind says
// that it did not let go cleanly (Crashed).
package pidlock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Lock is a held lock.
type Lock struct {
	f       *os.File
	crashed bool
}

// HeldError is a lock another process holds.
type HeldError struct {
	Path string
	PID  int // 0 when the file does not say
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is held by %s", e.Path, e.Holder())
}

// Holder names the holding process for a message.
func (e *HeldError) Holder() string {
	if e.PID == 0 {
		return "another process"
	}
	return fmt.Sprintf("pid %d", e.PID)
}

// Take takes the lock at path without waiting, creating the file (0600)
// when it is missing; a lock another process holds is a *HeldError.
func Take(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			held := &HeldError{Path: path}
			if b, _ := os.ReadFile(path); len(b) > 0 {
				held.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			return nil, held
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	l := &Lock{f: f, crashed: strings.TrimSpace(string(b[:n])) != ""}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return l, nil
}

// Crashed reports whether the previous holder ended without Release: a
// pid was still written when this process took the lock.
func (l *Lock) Crashed() bool { return l.crashed }

// Release lets the lock go, leaving the file empty: the next holder knows
// this one ended cleanly.
func (l *Lock) Release() error {
	_ = l.f.Truncate(0)
	return l.f.Close()
}
