package auth

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// EditFile rewrites the file at path under an exclusive flock on path+".lock":
// edit gets the current content (nil when absent) and returns the new one,
// which replaces the file atomically (0600). Processes sharing a file — the
// daemon and the CLI — never lose each other's changes.
func EditFile(path string, edit func(old []byte) ([]byte, error)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
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
}
