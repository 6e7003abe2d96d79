package rootfs_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// startSandbox runs image as a toolgate sandbox with the defaults (read-only
// root, network none, all capabilities dropped, user 1000) and waits for a
// first exec to answer.
func startSandbox(t *testing.T, image string) gateway.Sandbox {
	t.Helper()
	ctx := context.Background()
	_, clientBin := testenv.Binaries(t)
	m, err := docker.New(ctx, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	name := testenv.Prefix() + strings.ToLower(t.Name())
	spec := sandbox.AgentSpec{
		Agent: name, Image: image, Workspace: filepath.Join(t.TempDir(), name, "workspace"),
		User: proto.DefaultUser, Memory: 512 << 20, CPUs: 1, Pids: 256, ClientBinary: clientBin,
	}
	if err := m.SetSpecs([]sandbox.AgentSpec{spec}); err != nil {
		t.Fatal(err)
	}
	sb, err := m.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Remove(context.Background(), name) })
	return sb
}

func run(t *testing.T, sb gateway.Sandbox, argv ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	oc, err := sb.Exec(ctx, &gateway.ExecSpec{Argv: argv, Cwd: proto.WorkspacePath, Stdout: &out, Stderr: &out, Timeout: time.Minute, CallID: gateway.NewID()})
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return out.String(), oc.ExitCode
}

// Claude Code runs in the claude-code image as the sandbox user under
// toolgate's defaults: the native CLI starts, its home is writable, the
// root is not, and there is no network.
func TestClaudeCodeImage(t *testing.T) {
	sb := startSandbox(t, testenv.AgentImage(t, "claude-code"))
	for _, c := range []struct {
		argv []string
		want string
		code int
	}{
		{[]string{"claude", "--version"}, rootfs.ClaudeCodeVersion + " (Claude Code)", 0},
		{[]string{"id", "-u"}, "1000", 0},
		{[]string{"sh", "-c", "echo $HOME; mkdir -p $HOME/.claude && echo home-ok"}, "/tmp\nhome-ok", 0},
		{[]string{"sh", "-c", "git --version && python3 -c 'print(6*7)' && rg --version | head -1"}, "42", 0},
		{[]string{"touch", "/usr/local/bin/x"}, "Read-only file system", 1},
		{[]string{"ls", "-d", "/etc/claude-code"}, "/etc/claude-code", 0},
		{[]string{"python3", "-c", "import socket; print([n for _, n in socket.if_nameindex()])"}, "['lo']", 0},
	} {
		out, code := run(t, sb, c.argv...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%q: exit %d, output %q; want exit %d with %q", c.argv, code, out, c.code, c.want)
		}
	}
}

// bareRootfs is a user's own image at its barest: one static busybox and
// nothing else — no /tools, /workspace, /tmp, /run, PATH or passwd entry
// for the sandbox user.
func bareRootfs(t *testing.T) io.Reader {
	bin, err := os.ReadFile(rootfs.BusyboxPath)
	if err != nil {
		t.Skip(err) // the default image needs it too; its tests say so
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))},
		{Typeflag: tar.TypeSymlink, Name: "bin/sh", Linkname: "busybox", Mode: 0o777},
		{Typeflag: tar.TypeSymlink, Name: "bin/cat", Linkname: "busybox", Mode: 0o777},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(bin); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// toolgate needs nothing of an image but what it mounts: imported as is,
// without toolgate's USER, WORKDIR, PATH or CMD, the bare image runs execs,
// file I/O and finds the tools directory first on PATH.
func TestOwnImageNeedsNothingButMounts(t *testing.T) {
	testenv.NeedDocker(t)
	ctx := context.Background()
	m, err := docker.New(ctx, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tag := fmt.Sprintf("toolgate/bare:test-%d", os.Getpid())
	resp, err := m.Client().ImageImport(ctx, client.ImageImportSource{Source: bareRootfs(t), SourceName: "-"}, tag, client.ImageImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp)
	resp.Close()
	t.Cleanup(func() {
		_, _ = m.Client().ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true})
	})
	sb := startSandbox(t, tag)
	if out, code := run(t, sb, "/bin/sh", "-c", "echo hi > /workspace/f && cat /workspace/f && echo $PATH && id -u"); code != 0 || out != "hi\n/tools/bin:"+sandbox.DefaultPath+"\n1000\n" {
		t.Fatalf("exit %d: %q", code, out)
	}
	if err := sb.WriteFile(ctx, "/workspace/sub/g.txt", []byte("written")); err != nil {
		t.Fatal(err)
	}
	f, err := sb.ReadFile(ctx, "/workspace/sub/g.txt", 100)
	if err != nil || string(f.Data) != "written" {
		t.Fatalf("read back: %v %+v", err, f)
	}
}

// A rebuilt image does not leave the one it replaces behind (an agent
// profile's is hundreds of MB), unless a container still uses it.
func TestRebuildRemovesTheReplacedImage(t *testing.T) {
	testenv.NeedDocker(t)
	if _, err := os.Stat(rootfs.BusyboxPath); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	m, err := docker.New(ctx, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tag := fmt.Sprintf("toolgate/rebuild:test-%d", os.Getpid())
	t.Cleanup(func() {
		_, _ = m.Client().ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true})
	})
	p, _ := rootfs.Lookup("busybox-host") // offline: what is tested is the manager
	id := func() string {
		img, err := m.Client().ImageInspect(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		return img.ID
	}
	if _, err := m.BuildImage(ctx, tag, p, rootfs.Env{}, true); err != nil {
		t.Fatal(err)
	}
	first := id()
	if built, err := m.BuildImage(ctx, tag, p, rootfs.Env{}, false); err != nil || built {
		t.Fatalf("a current image was rebuilt: %v %v", built, err)
	}
	if _, err := m.BuildImage(ctx, tag, p, rootfs.Env{}, true); err != nil {
		t.Fatal(err)
	}
	if second := id(); second == first {
		t.Fatal("the forced rebuild kept the same image")
	}
	if _, err := m.Client().ImageInspect(ctx, first); err == nil {
		t.Errorf("the replaced image %s is still there", first)
	}
}
