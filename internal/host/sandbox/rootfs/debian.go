package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultMirror is the Debian archive mmdebstrap fetches from unless
// $TOOLGATE_DEBIAN_MIRROR names another.
const DefaultMirror = "http://deb.debian.org/debian"

// mirror is the Debian archive to fetch from.
func mirror() string {
	if m := os.Getenv("TOOLGATE_DEBIAN_MIRROR"); m != "" {
		return m
	}
	return DefaultMirror
}

// debianBase is a minimal Debian system made by mmdebstrap, cached as a
// tar keyed by suite and package list.
type debianBase struct {
	Suite    string
	Packages []string // beyond the minbase variant
}

// key identifies the tree: the mirror is not part of it (any mirror of
// the same suite gives the same packages).
func (d debianBase) key() string {
	sum := sha256.Sum256([]byte(d.Suite + "\x00" + strings.Join(d.Packages, ",")))
	return d.Suite + "-" + hex.EncodeToString(sum[:6])
}

// tarball returns the cached base tar, building it first when missing.
func (d debianBase) tarball(ctx context.Context, env Env) (string, error) {
	path := filepath.Join(env.cache(), "debian-"+d.key()+".tar")
	return path, cached(env, path, func(tmp string) error {
		if _, err := exec.LookPath("mmdebstrap"); err != nil {
			return errors.New("mmdebstrap is not installed; it builds the Debian base offline from the archive: apt-get install mmdebstrap")
		}
		mirror := mirror()
		env.logf("building a Debian %s base with mmdebstrap from %s (about a minute; cached in %s)", d.Suite, mirror, filepath.Dir(path))
		args := []string{"--variant=minbase", "--include=" + strings.Join(d.Packages, ","),
			// Documentation and translations have no use in a sandbox.
			"--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
			"--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-exclude=/usr/share/info/*",
			"--format=tar", d.Suite, tmp, mirror}
		return runTool(exec.CommandContext(ctx, "mmdebstrap", args...), "mmdebstrap "+d.Suite)
	})
}

// cached makes path by calling build with a temporary name beside it, then
// renaming: a build cut short never leaves a half file behind. An exclusive
// lock on path.lock lets concurrent builders (parallel test binaries) wait
// for the first instead of building twice.
func cached(env Env, path string, build func(tmp string) error) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", path, err)
	}
	if _, err := os.Stat(path); err == nil {
		return nil // built while we waited
	}
	tmp := path + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := build(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// runTool runs a build tool with its output kept: a failure is named as
// what (the command as a person would type it), with the output's end.
func runTool(cmd *exec.Cmd, what string) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", what, err, tail(out.String(), 2000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// writeDebian streams the base tar to t with the sandbox user added to
// passwd and group (home /tmp, the one writable place besides the
// workspace under a read-only root) and device nodes left out (the Engine
// provides /dev; an unprivileged build could not have made them anyway).
func writeDebian(t *tarWriter, base string) error {
	f, err := os.Open(base)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for t.err == nil {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", base, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if name == "" {
			continue
		}
		h.Name = name
		switch {
		case strings.HasPrefix(name, "dev/") && name != "dev/":
			continue
		case name == "etc/passwd" || name == "etc/group":
			body, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			line := fmt.Sprintf("agent:x:%d:%d:agent:/tmp:/bin/bash\n", AgentUID, AgentUID)
			if name == "etc/group" {
				line = fmt.Sprintf("agent:x:%d:\n", AgentUID)
			}
			if len(body) > 0 && body[len(body)-1] != '\n' {
				body = append(body, '\n')
			}
			t.file(name, h.Mode, append(body, line...))
			continue
		}
		t.copyEntry(h, tr)
	}
	return nil
}
