package rootfs

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
)

// BusyboxPath is where Debian's busybox-static puts its binary.
const BusyboxPath = "/bin/busybox"

// DefaultTag is the default sandbox image (proto.DefaultImage).
const DefaultTag = "toolgate/sandbox:latest"

// applets get a /bin symlink to busybox in the busybox images.
var applets = []string{
	"sh", "ash", "ls", "cat", "echo", "mkdir", "mv", "rm", "rmdir", "env", "sleep", "true",
	"false", "printf", "head", "tail", "wc", "grep", "egrep", "sed", "awk", "find", "xargs",
	"kill", "wget", "id", "test", "[", "timeout", "stat", "cp", "touch", "seq", "yes", "dd",
	"ps", "pwd", "ln", "chmod", "basename", "dirname", "readlink", "realpath", "sort", "uniq",
	"cut", "tr", "tee", "diff", "patch", "tar", "gzip", "gunzip", "date", "du", "df", "which",
	"whoami", "hostname", "uname", "expr", "md5sum", "sha256sum", "base64", "vi", "less",
	"hexdump", "od", "nproc", "usleep", "mktemp", "cmp", "sync", "nc", "more", "fgrep", "zcat",
}

// Busybox is the default profile: a scratch root filesystem around a
// static busybox built here from Debian's source against musl (see
// busyboxSource for why), a couple of megabytes.
type Busybox struct{}

// HostBusybox is the same root filesystem around the host's own
// busybox-static (glibc), for a host that cannot build: nothing to
// download or compile.
type HostBusybox struct{ Path string }

func init() {
	Register(Busybox{})
	Register(HostBusybox{Path: BusyboxPath})
}

func (Busybox) Name() string { return "default" }
func (Busybox) Summary() string {
	return "busybox (Debian's, built here against musl): a shell and the usual utilities, 1 MB"
}
func (Busybox) Tag() string     { return DefaultTag }
func (Busybox) Version() string { return muslBusyboxVersion() }
func (Busybox) Env() []string   { return nil }

func (Busybox) Write(ctx context.Context, env Env, w io.Writer) error {
	path, err := muslBusybox(ctx, env)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return writeBusyboxRoot(w, bin)
}

func (HostBusybox) Name() string { return "busybox-host" }
func (HostBusybox) Summary() string {
	return "busybox-static from the host (glibc): the default image's applets with nothing to build, 2 MB"
}
func (HostBusybox) Tag() string     { return "toolgate/busybox-host:latest" }
func (HostBusybox) Version() string { return "busybox-host-2" }
func (HostBusybox) Env() []string   { return nil }

func (b HostBusybox) Write(_ context.Context, _ Env, w io.Writer) error {
	bin, err := staticBusybox(b.Path)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, "install Debian's static busybox: apt-get install busybox-static")
	}
	return writeBusyboxRoot(w, bin)
}

// writeBusyboxRoot writes the busybox images' root filesystem around bin.
func writeBusyboxRoot(w io.Writer, bin []byte) error {
	t := newTarWriter(w)
	for _, d := range []string{"bin", "etc", "dev", "proc", "sys", "root", "run", "run/toolgate",
		"usr", "usr/bin", "usr/local", "usr/local/bin", "tools", "tools/bin", "var"} {
		t.dir(d, 0o755, 0)
	}
	t.dir("tmp", 0o1777, 0)
	t.dir("workspace", 0o755, AgentUID)
	t.file("bin/busybox", 0o755, bin)
	for _, a := range applets {
		t.symlink("bin/"+a, "busybox")
	}
	t.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"))
	t.file("etc/group", 0o644, []byte("root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"))
	// Mount points of the client and launcher binaries: the root is read-only at run time.
	t.file("tools/toolgate-client", 0o755, nil)
	t.file("tools/toolgate-launch", 0o755, nil)
	return t.close()
}

// staticBusybox reads busybox and refuses a dynamically linked one: the
// image has no libc.
func staticBusybox(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked; the sandbox image has no libc", path)
		}
	}
	return b, nil
}
