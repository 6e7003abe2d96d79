package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile, in HOME, is held (flock) by the daemon serving that home. It is
// taken before anything else is opened: a second daemon must not repair the
// "torn" tail of a log the first is writing, nor touch its sandboxes.
const LockFile = "serve.lock"

// lockHome takes HOME/serve.lock or says which daemon holds it. The lock
// goes with the process (flock), so a crash never leaves it stale; the file
// stays and only records the holder's pid for the message.
func lockHome(home string) (*os.File, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(home, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the home: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, _ := os.ReadFile(path); len(b) > 0 {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = fmt.Sprintf("pid %d", pid)
				}
			}
			return nil, fmt.Errorf("another toolgate daemon (%s) is serving %s; not starting a second one", holder, home)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
