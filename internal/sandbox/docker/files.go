package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/sandbox"
)

// maxLinks bounds symlink hops in ReadFile, as the kernel's ELOOP does.
const maxLinks = 40

// ReadFile reads a file through the Engine's archive API, which resolves
// symlinks inside the container's root, never the host's. It returns at
// most limit bytes (limit < 0: all) and the file's full size.
func (s *Sandbox) ReadFile(ctx context.Context, p string, limit int64) (*gateway.File, error) {
	if err := checkAbs(p); err != nil {
		return nil, err
	}
	if onTmpfs(p) {
		return s.readViaExec(ctx, p, limit)
	}
	id, _ := s.current()
	revived := false
	for hops := 0; ; hops++ {
		res, err := s.m.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: p})
		if err != nil {
			if revived || !s.revive(ctx) {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			revived = true // the container is back (a removed one is new): once more
			id, _ = s.current()
			continue
		}
		st := res.Stat
		switch {
		case st.Mode&os.ModeSymlink != 0:
			res.Content.Close()
			if hops >= maxLinks {
				return nil, fmt.Errorf("read %s: too many levels of symbolic links", p)
			}
			// LinkTarget is already resolved within the container's root.
			p = st.LinkTarget
			continue
		case st.Mode.IsDir():
			res.Content.Close()
			return nil, fmt.Errorf("read %s: is a directory", p)
		case !st.Mode.IsRegular():
			res.Content.Close()
			return nil, fmt.Errorf("read %s: not a regular file (%s)", p, st.Mode.Type())
		}
		defer res.Content.Close()
		tr := tar.NewReader(res.Content)
		hdr, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("read %s: archive: %w", p, err)
		}
		r := io.Reader(tr)
		if limit >= 0 {
			r = io.LimitReader(tr, limit)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		return &gateway.File{Path: p, Size: hdr.Size, Mode: uint32(st.Mode.Perm()), Data: data}, nil
	}
}

// WriteFile atomically replaces a file: parent directories by an argv exec
// (as the sandbox user, so permissions apply), the bytes as a temp file
// through the archive API, then an argv `mv` over the target. No shell is
// involved, so any file name is safe. An existing file keeps its mode.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	if err := checkAbs(p); err != nil {
		return err
	}
	p = path.Clean(p)
	dir := path.Dir(p)
	_, spec := s.current()
	uid, gid, _ := sandbox.ParseUser(spec.UserOrDefault())

	if err := s.argv(ctx, "write "+p, "mkdir", "-p", "--", dir); err != nil {
		return err
	}
	if onTmpfs(p) {
		return s.writeViaExec(ctx, p, data)
	}
	mode := int64(0o644)
	id, _ := s.current()
	if st, err := s.m.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: p}); err == nil {
		if st.Stat.Mode.IsDir() {
			return fmt.Errorf("write %s: is a directory", p)
		}
		if st.Stat.Mode.IsRegular() {
			mode = int64(st.Stat.Mode.Perm())
		}
	}
	tmp := ".toolgate-tmp-" + randomHex()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: tmp, Size: int64(len(data)), Mode: mode,
		Uid: uid, Gid: gid, ModTime: time.Now(), Format: tar.FormatPAX,
	}); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if _, err := s.m.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dir, Content: &buf}); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return s.rename(ctx, path.Join(dir, tmp), p)
}

// rename moves the temp file over the target, removing it on failure.
func (s *Sandbox) rename(ctx context.Context, tmpPath, p string) error {
	if err := s.argv(ctx, "write "+p, "mv", "-f", "--", tmpPath, p); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
		defer cancel()
		_, _, _ = s.run(rctx, []string{"rm", "-f", "--", tmpPath}, nil, nil)
		return err
	}
	return nil
}

// tmpfsDirs are the sandbox's tmpfs mounts. They live only in the
// container's mount namespace, so the archive API cannot see them (it
// reads and writes the image layer underneath); files there go through
// argv execs as the sandbox user instead.
var tmpfsDirs = []string{"/tmp", sandbox.RunDir}

func onTmpfs(p string) bool {
	p = path.Clean(p)
	for _, d := range tmpfsDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func (s *Sandbox) readViaExec(ctx context.Context, p string, limit int64) (*gateway.File, error) {
	var st bytes.Buffer
	// %F file type, %s size, %a octal permissions; -L follows symlinks in the sandbox.
	if err := s.argvIO(ctx, "read "+p, nil, &st, "stat", "-L", "-c", "%F|%s|%a", "--", p); err != nil {
		return nil, err
	}
	f := strings.Split(strings.TrimSpace(st.String()), "|")
	if len(f) != 3 {
		return nil, fmt.Errorf("read %s: unexpected stat output %q", p, st.String())
	}
	switch f[0] {
	case "regular file", "regular empty file":
	case "directory":
		return nil, fmt.Errorf("read %s: is a directory", p)
	default:
		return nil, fmt.Errorf("read %s: not a regular file (%s)", p, f[0])
	}
	size, err1 := strconv.ParseInt(f[1], 10, 64)
	mode, err2 := strconv.ParseUint(f[2], 8, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("read %s: unexpected stat output %q", p, st.String())
	}
	var data bytes.Buffer
	argv := []string{"cat", "--", p}
	if limit >= 0 {
		argv = []string{"head", "-c", strconv.FormatInt(limit, 10), "--", p}
	}
	if err := s.argvIO(ctx, "read "+p, nil, &data, argv...); err != nil {
		return nil, err
	}
	return &gateway.File{Path: p, Size: size, Mode: uint32(mode), Data: data.Bytes()}, nil
}

func (s *Sandbox) writeViaExec(ctx context.Context, p string, data []byte) error {
	tmpPath := path.Join(path.Dir(p), ".toolgate-tmp-"+randomHex())
	if err := s.argvIO(ctx, "write "+p, data, io.Discard, "dd", "of="+tmpPath, "bs=65536"); err != nil {
		return err
	}
	return s.rename(ctx, tmpPath, p)
}

// argv runs a helper command and turns a failure into an error naming what.
func (s *Sandbox) argv(ctx context.Context, what string, argv ...string) error {
	return s.argvIO(ctx, what, nil, nil, argv...)
}

func (s *Sandbox) argvIO(ctx context.Context, what string, stdin []byte, stdout io.Writer, argv ...string) error {
	code, stderr, err := s.run(ctx, argv, stdin, stdout)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		if stderr == "" {
			stderr = fmt.Sprintf("exit code %d", code)
		}
		return fmt.Errorf("%s: %s failed: %s", what, argv[0], stderr)
	}
	return nil
}

func checkAbs(p string) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("path %q is not absolute (paths are as the sandbox sees them)", p)
	}
	if bytes.IndexByte([]byte(p), 0) >= 0 {
		return errors.New("path contains a NUL byte")
	}
	return nil
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
