package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/moby/moby/client"
)

// BusyboxPath is where Debian's busybox-static puts its binary.
const BusyboxPath = "/bin/busybox"

// applets get a /bin symlink to busybox in the default image.
var applets = []string{
	"sh", "ash", "ls", "cat", "echo", "mkdir", "mv", "rm", "rmdir", "env", "sleep", "true",
	"false", "printf", "head", "tail", "wc", "grep", "egrep", "sed", "awk", "find", "xargs",
	"kill", "wget", "id", "test", "[", "timeout", "stat", "cp", "touch", "seq", "yes", "dd",
	"ps", "pwd", "ln", "chmod", "basename", "dirname", "readlink", "realpath", "sort", "uniq",
	"cut", "tr", "tee", "diff", "patch", "tar", "gzip", "gunzip", "date", "du", "df", "which",
	"whoami", "hostname", "uname", "expr", "md5sum", "sha256sum", "base64", "vi", "less",
	"hexdump", "od", "nproc", "usleep", "mktemp", "cmp", "sync",
}

// imageChanges configure the imported image (Dockerfile instructions).
var imageChanges = []string{
	"USER 1000:1000",
	"WORKDIR /workspace",
	"ENV PATH=/tools/bin:/usr/local/bin:/usr/bin:/bin",
	`CMD ["/tools/toolgate-client","init"]`,
}

// BuildDefaultImage builds the default sandbox image offline: a scratch
// root filesystem made here in Go around the host's static busybox,
// imported through the Engine. It does nothing when tag exists unless force.
// It reports whether it built.
func (m *Manager) BuildDefaultImage(ctx context.Context, tag string, force bool) (bool, error) {
	if !force {
		exists, err := m.imageExists(ctx, tag)
		if err != nil {
			return false, err
		}
		if exists {
			return false, nil
		}
	}
	rootfs, err := DefaultRootfs(BusyboxPath)
	if err != nil {
		return false, err
	}
	resp, err := m.cli.ImageImport(ctx,
		client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"},
		tag, client.ImageImportOptions{Changes: imageChanges, Message: "toolgate default sandbox image"})
	if err != nil {
		return false, fmt.Errorf("importing image %s: %w", tag, err)
	}
	defer resp.Close()
	if err := drainProgress(resp); err != nil {
		return false, fmt.Errorf("importing image %s: %w", tag, err)
	}
	return true, nil
}

func (m *Manager) imageExists(ctx context.Context, ref string) (bool, error) {
	res, err := m.cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", ref)})
	if err != nil {
		return false, fmt.Errorf("listing images: %w", err)
	}
	return len(res.Items) > 0, nil
}

// drainProgress reads the Engine's JSON progress stream and returns the
// error it reports, if any.
func drainProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

// DefaultRootfs returns the default image's root filesystem as a tar.
func DefaultRootfs(busybox string) ([]byte, error) {
	bin, err := staticBusybox(busybox)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	add := func(h *tar.Header, body []byte) {
		h.ModTime = now
		h.Format = tar.FormatPAX
		if err == nil {
			err = tw.WriteHeader(h)
		}
		if err == nil && len(body) > 0 {
			_, err = tw.Write(body)
		}
	}
	dir := func(name string, mode int64, uid int) {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid}, nil)
	}
	file := func(name string, mode int64, body []byte) {
		add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))}, body)
	}
	for _, d := range []string{"bin", "etc", "dev", "proc", "sys", "root", "run", "run/toolgate",
		"usr", "usr/bin", "usr/local", "usr/local/bin", "tools", "tools/bin", "var"} {
		dir(d, 0o755, 0)
	}
	dir("tmp", 0o1777, 0)
	dir("workspace", 0o755, 1000)
	file("bin/busybox", 0o755, bin)
	for _, a := range applets {
		add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
	}
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"))
	file("etc/group", 0o644, []byte("root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"))
	// Mount points of the client and launcher binaries: the root is read-only at run time.
	file("tools/toolgate-client", 0o755, nil)
	file("tools/toolgate-launch", 0o755, nil)
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("building the root filesystem: %w", err)
	}
	return buf.Bytes(), nil
}

// staticBusybox reads busybox and refuses a dynamically linked one: the
// image has no libc.
func staticBusybox(path string) ([]byte, error) {
	const hint = "install Debian's static busybox: apt-get install busybox-static"
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w (%s)", path, err, hint)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s is not an ELF executable: %w (%s)", path, err, hint)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked; the sandbox image has no libc (%s)", path, hint)
		}
	}
	return b, nil
}
