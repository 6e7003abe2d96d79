package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/lib/pidlock"
)

// LockFile, in HOME, is held (flock) by the daemon serving that home. It is
// taken before anything else is opened: a second daemon must not repair the
// "torn" tail of a log the first is writing, nor touch its sandboxes.
const LockFile = "serve.lock"

// lockHome takes HOME/serve.lock or says which daemon holds it. The lock
// goes with the process, so a crash never leaves it stale.
func lockHome(home string) (*pidlock.Lock, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	lock, err := pidlock.Take(filepath.Join(home, LockFile))
	var held *pidlock.HeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("another toolgate daemon (%s) is serving %s; not starting a second one", held.Holder(), home)
	}
	if err != nil {
		return nil, fmt.Errorf("locking the home: %w", err)
	}
	return lock, nil
}

// homeLock holds HOME/serve.lock while the daemon serves.
func (d *Daemon) homeLock() service {
	var lock *pidlock.Lock
	return service{name: "home lock", start: func(context.Context) (err error) {
		lock, err = lockHome(d.opts.Home)
		return err
	}, stop: func(context.Context) error { return lock.Release() }}
}
