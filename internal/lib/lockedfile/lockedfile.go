// Package lockedfile is a JSON state file shared by processes — the daemon
// and the CLI both edit HOME/tokens.json and HOME/pins.json. Every change is
// a read-modify-write under an flock on a sibling lock file, so no process
// loses another's change, and reads re-load the file whenever it changed on
// disk, so an edit by the CLI takes effect in the daemon at once.
package lockedfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// File is one state file holding a T.
type File[T any] struct {
	path  string
	parse func(b []byte) (T, error) // b is empty for a missing or empty file

	mu    sync.Mutex
	v     T
	stat  os.FileInfo // of the file last loaded; nil when it was absent
	loads uint64
}

// Open loads the file at path with parse; a missing file is parsed as empty.
func Open[T any](path string, parse func(b []byte) (T, error)) (*File[T], error) {
	f := &File[T]{path: path, parse: parse}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.loadLocked(); err != nil {
		return nil, err
	}
	return f, nil
}

// Path is where the file lives.
func (f *File[T]) Path() string { return f.path }

// loadLocked reads the file when it changed since the last load (or was never
// loaded): a stat per read is the price of the CLI's edits taking effect at once.
func (f *File[T]) loadLocked() error {
	fi, err := os.Stat(f.path)
	if errors.Is(err, os.ErrNotExist) {
		if f.stat == nil && f.loads > 0 {
			return nil
		}
		v, err := f.parse(nil)
		if err != nil {
			return err
		}
		f.v, f.stat = v, nil
		f.loads++
		return nil
	}
	if err != nil {
		return err
	}
	if f.stat != nil && os.SameFile(fi, f.stat) && fi.ModTime().Equal(f.stat.ModTime()) && fi.Size() == f.stat.Size() {
		return nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	v, err := f.parse(b)
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	f.v, f.stat = v, fi
	f.loads++
	return nil
}

// Read calls fn with the content as it is on disk now. fn runs under the
// file's mutex; it must neither keep nor change what it is given.
func (f *File[T]) Read(fn func(v T)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.loadLocked(); err != nil {
		return err
	}
	fn(f.v)
	return nil
}

// Edit applies change to the content as it is on disk now, under the file
// lock, and writes what change returns as indented JSON (0600).
func (f *File[T]) Edit(change func(v T) (T, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := editFile(f.path, func(old []byte) ([]byte, error) {
		v, err := f.parse(old)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		if v, err = change(v); err != nil {
			return nil, err
		}
		b, err := json.MarshalIndent(v, "", "  ")
		return append(b, '\n'), err
	})
	if err != nil {
		return err
	}
	f.stat = nil // the content changed even if the new stat looks like the old one
	return f.loadLocked()
}

// Loads counts the times the content was loaded: it moves whenever what
// Read sees may have changed.
func (f *File[T]) Loads() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loads
}

// editFile rewrites the file at path under an exclusive flock on path+".lock":
// edit gets the current content (nil when absent) and returns the new one,
// which replaces the file atomically (0600).
func editFile(path string, edit func(old []byte) ([]byte, error)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return locked(path, func() error {
		old, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		b, err := edit(old)
		if err != nil {
			return err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	})
}

// RemoveLeftover deletes the temporary file of an edit of path whose
// process died before renaming it into place. It takes the edit lock, so it
// never removes a file another process is writing.
func RemoveLeftover(path string) error {
	if _, err := os.Lstat(path + ".tmp"); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return locked(path, func() error {
		if err := os.Remove(path + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
}

// locked runs fn holding the exclusive flock on path+".lock".
func locked(path string, fn func() error) error {
	lf, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return fn()
}
