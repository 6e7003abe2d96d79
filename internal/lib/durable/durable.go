// Package durable writes files that survive a crash whole: the new
// content or the old, never half of it, and still there after power loss.
package durable

import (
	"errors"
	"os"
	"path/filepath"
)

// WriteFile replaces path with b (mode perm): written to path.tmp,
// fsynced, renamed over path, and the directory fsynced.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory: what was created, renamed or removed in it
// is on disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
