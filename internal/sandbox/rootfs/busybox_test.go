package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

func TestDefaultRootfs(t *testing.T) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Skip("busybox-static not installed")
	}
	var buf bytes.Buffer
	if err := (Busybox{Path: BusyboxPath}).Write(context.Background(), Env{}, &buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	entries := map[string]*tar.Header{}
	bodies := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
		if h.Name == "etc/passwd" || h.Name == "etc/group" {
			body, _ := io.ReadAll(tr)
			bodies[h.Name] = string(body)
		}
	}
	for _, a := range []string{"sh", "ls", "mv", "mkdir", "ps", "timeout", "wget", "["} {
		h := entries["bin/"+a]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("applet %s: %+v", a, h)
		}
	}
	for name, mode := range map[string]int64{"tmp/": 0o1777, "workspace/": 0o755, "tools/bin/": 0o755, "bin/busybox": 0o755} {
		if h := entries[name]; h == nil || h.Mode != mode {
			t.Errorf("%s: %+v", name, h)
		}
	}
	if h := entries["workspace/"]; h.Uid != 1000 {
		t.Errorf("workspace owner %d", h.Uid)
	}
	if !strings.Contains(bodies["etc/passwd"], "agent:x:1000:1000:") || !strings.Contains(bodies["etc/group"], "agent:x:1000:") {
		t.Errorf("passwd/group: %q %q", bodies["etc/passwd"], bodies["etc/group"])
	}
}

func TestBusyboxMustBeStatic(t *testing.T) {
	if err := (Busybox{Path: "/nonexistent/busybox"}).Write(context.Background(), Env{}, io.Discard); err == nil || !strings.Contains(err.Error(), "apt-get install busybox-static") {
		t.Errorf("missing: %v", err)
	}
	exe, err := os.Executable() // the test binary: dynamically linked unless built static
	if err != nil {
		t.Fatal(err)
	}
	for _, dyn := range []string{"/bin/ls", "/usr/bin/env", exe} {
		if _, err := staticBusybox(dyn); err == nil {
			continue // static on this host; try the next
		} else if !strings.Contains(err.Error(), "dynamically linked") {
			t.Fatalf("%s: %v", dyn, err)
		}
		return
	}
	t.Skip("no dynamically linked executable found")
}
