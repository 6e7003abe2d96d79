package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Small filesystems a test can fill, so a full disk is a real ENOSPC.
const (
	FSTmpfs = "tmpfs" // size-limited tmpfs
	FSExt4  = "ext4"  // ext4 on a loop-mounted image, no reserved blocks
)

// SmallFS mounts a fresh filesystem of the given kind and size (bytes) and
// returns its mount point; t.Cleanup unmounts it. Mounting needs root: when
// it is impossible the test is skipped, or fails in CI (CI=true or
// TOOLGATE_REQUIRE_DOCKER=1), where a skipped fault test is a hole.
func SmallFS(t testing.TB, kind string, size int64) string {
	t.Helper()
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	switch kind {
	case FSTmpfs:
		cmds = [][]string{{"mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", mnt}}
	case FSExt4:
		img := filepath.Join(dir, "fs.img")
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, size); err != nil {
			t.Fatal(err)
		}
		cmds = [][]string{{"mkfs.ext4", "-q", "-F", "-m", "0", img}, {"mount", "-o", "loop", img, mnt}}
	default:
		t.Fatalf("testenv: unknown filesystem kind %q", kind)
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			err = fmt.Errorf("cannot make a small %s filesystem: %s: %v\n%s", kind, c[0], err, out)
			if os.Getenv("CI") == "true" || os.Getenv("TOOLGATE_REQUIRE_DOCKER") == "1" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	}
	t.Cleanup(func() {
		// Lazy, so a file a failed test left open cannot keep the mount.
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v\n%s", mnt, err, out)
		}
	})
	return mnt
}
