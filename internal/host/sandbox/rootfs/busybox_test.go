package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// readRootfs writes profile p's tar and returns its headers by name and
// the bodies of its regular files.
func readRootfs(t *testing.T, p Profile) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := p.Write(context.Background(), Env{Log: testLog{t}}, &buf); err != nil {
		t.Fatal(err)
	}
	entries, bodies := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return entries, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
		if bodies[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// needBuild skips without the busybox build tools, and fails without
// them in CI.
func needBuild(t *testing.T) {
	t.Helper()
	if testing.Short() { // as testenv.Long says it
		t.Skip("-short: needs a musl build of busybox")
	}
	if err := needTools(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func TestBusyboxRootfs(t *testing.T) {
	for _, c := range []struct {
		p    Profile
		need func(*testing.T)
	}{
		{Busybox{}, needBuild},
		{HostBusybox{Path: BusyboxPath}, func(t *testing.T) {
			if _, err := os.Stat(BusyboxPath); err != nil {
				t.Skip("busybox-static not installed")
			}
		}},
	} {
		t.Run(c.p.Name(), func(t *testing.T) {
			c.need(t)
			entries, bodies := readRootfs(t, c.p)
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
			if !bytes.Contains(bodies["etc/passwd"], []byte("agent:x:1000:1000:")) || !bytes.Contains(bodies["etc/group"], []byte("agent:x:1000:")) {
				t.Errorf("passwd/group: %q %q", bodies["etc/passwd"], bodies["etc/group"])
			}
			if _, err := staticBusybox(writeTemp(t, bodies["bin/busybox"])); err != nil {
				t.Error(err)
			}
		})
	}
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHostBusyboxMustBeStatic(t *testing.T) {
	if err := (HostBusybox{Path: "/nonexistent/busybox"}).Write(context.Background(), Env{}, io.Discard); err == nil || !strings.Contains(err.Error(), "apt-get install busybox-static") {
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

// A host without the build tools is told which are missing and what
// installs them, before anything is downloaded.
func TestBusyboxBuildNeedsTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cache := t.TempDir()
	err := Busybox{}.Write(context.Background(), Env{Cache: cache}, io.Discard)
	for _, want := range []string{"lacks musl-gcc, make, patch, tar, xz, bzip2", "apt-get install musl-tools make patch xz-utils bzip2", "--profile busybox-host"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q in it", err, want)
		}
	}
	left, _ := filepath.Glob(filepath.Join(cache, "*", "*"))
	for _, f := range left {
		if !strings.HasSuffix(f, ".lock") {
			t.Errorf("a failed build left %s", f)
		}
	}
}

// download keeps a file only when its SHA-256 is the pinned one, names
// the mirror's refusal, and fetches a kept file once.
func TestDownload(t *testing.T) {
	good := []byte("the pinned content")
	sum := sha256.Sum256(good)
	want := hex.EncodeToString(sum[:])
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/debian/pool/x/good", "/debian/pool/x/tampered":
			body := good
			if strings.HasSuffix(r.URL.Path, "tampered") {
				body = []byte("something else")
			}
			_, _ = w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("TOOLGATE_DEBIAN_MIRROR", srv.URL+"/debian/")
	for _, c := range []struct{ name, wantErr string }{
		{"good", ""},
		{"tampered", "SHA-256 " + hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte("something else")); return s[:] }()) + ", expected " + want + ": refused"},
		{"gone", "404 Not Found (toolgate pins this file; a mirror that no longer has it can be replaced with TOOLGATE_DEBIAN_MIRROR)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path, err := download(context.Background(), Env{}, "pool/x", c.name, want, dir)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), srv.URL+"/debian/pool/x/"+c.name) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				if left, _ := os.ReadDir(dir); len(left) > 1 || (len(left) == 1 && !strings.HasSuffix(left[0].Name(), ".lock")) {
					t.Errorf("a refused download left %v", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			before := hits.Load()
			if again, err := download(context.Background(), Env{}, "pool/x", c.name, want, dir); err != nil || again != path {
				t.Fatalf("second download: %q %v", again, err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, good) || hits.Load() != before {
				t.Errorf("kept %q, %d more requests", b, hits.Load()-before)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		srv.Close()
		_, err := download(context.Background(), Env{}, "pool/x", "good", want, t.TempDir())
		url := srv.URL + "/debian/pool/x/good"
		if err == nil || strings.Count(err.Error(), url) != 1 || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("error %v: want the URL once and why", err)
		}
	})
}

// The musl build behaves as the applets an agent's commands rely on:
// those whose musl variants differ (grep and sed regexps, awk, wget) most.
func TestMuslBusyboxApplets(t *testing.T) {
	needBuild(t)
	bb, err := muslBusybox(context.Background(), Env{Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	// The banner names the source it was built from (and no build hour).
	if out, err := exec.Command(bb, "--help").Output(); err != nil || !strings.HasPrefix(string(out), "BusyBox v1.35.0 (Debian "+busyboxSource.Version+", musl) multi-call binary.\n") {
		t.Errorf("busybox --help: %v %.80q", err, out)
	}
	// Every /bin link of the image names one of its applets.
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range applets {
		if !slices.Contains(strings.Fields(string(list)), a) {
			t.Errorf("the image links /bin/%s, which busybox has no applet for", a)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("served " + r.URL.Path)) }))
	defer srv.Close()
	dir := t.TempDir()
	for _, c := range []struct {
		argv        []string
		stdin, want string
	}{
		{[]string{"sh", "-c", "echo $((6*7)) ${0##*/}"}, "", "42 sh\n"},
		{[]string{"sh", "-c", `echo Hi | "$1" tr a-z A-Z`, "sh", bb}, "", "HI\n"},
		{[]string{"grep", "-i", "-E", "fo+|^b.r$"}, "Foo\nbar\nbaz\n", "Foo\nbar\n"},
		{[]string{"grep", "-o", "[0-9]\\+"}, "a12b345\n", "12\n345\n"},
		{[]string{"sed", "-E", "s/(a+)b/<\\1>/g"}, "aab ab c\n", "<aa> <a> c\n"},
		{[]string{"awk", "-F:", "{s+=$2} END {print s, NR}"}, "a:1\nb:2\n", "3 2\n"},
		{[]string{"sort", "-n"}, "10\n9\n100\n", "9\n10\n100\n"},
		{[]string{"sha256sum"}, "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  -\n"},
		{[]string{"wget", "-q", "-O", "-", srv.URL + "/x"}, "", "served /x"},
		{[]string{"find", dir, "-maxdepth", "0", "-type", "d"}, "", dir + "\n"},
	} {
		cmd := exec.Command(bb, c.argv...)
		cmd.Stdin = strings.NewReader(c.stdin)
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != c.want {
			t.Errorf("busybox %q: %v %q, want %q", c.argv, err, out, c.want)
		}
	}
}

// BenchmarkBusyboxStart is what one process costs an agent: `busybox
// true` started and waited for, the musl build beside the host's glibc
// busybox-static. On a nested VM the glibc one pays for its `cpuid`
// probes (~0.7 ms of CPU; `perf stat -r 300 busybox true`).
//
//	go test ./internal/host/sandbox/rootfs -run '^$' -bench BusyboxStart
func BenchmarkBusyboxStart(b *testing.B) {
	musl, err := muslBusybox(context.Background(), Env{})
	if err != nil {
		b.Skip(err)
	}
	for _, c := range []struct{ name, path string }{{"musl", musl}, {"host-glibc", BusyboxPath}} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := os.Stat(c.path); err != nil {
				b.Skip(err)
			}
			for b.Loop() {
				if err := exec.Command(c.path, "true").Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
