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
	id, _ := s.current()
	for hops := 0; ; hops++ {
		res, err := s.m.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: p})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
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
	tmpPath := path.Join(dir, tmp)
	if err := s.argv(ctx, "write "+p, "mv", "-f", "--", tmpPath, p); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
		defer cancel()
		_, _, _ = s.run(rctx, []string{"rm", "-f", "--", tmpPath})
		return err
	}
	return nil
}

// argv runs a helper command and turns a failure into an error naming what.
func (s *Sandbox) argv(ctx context.Context, what string, argv ...string) error {
	code, stderr, err := s.run(ctx, argv)
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
