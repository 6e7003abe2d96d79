package rootfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// busyboxSource is Debian's busybox source package, pinned: the upstream
// tarball, Debian's patches (its security fixes among them) and the
// configuration of its busybox-static, so the default image has the
// applets a Debian user knows, built against musl instead of glibc.
//
// Why musl: glibc's start-up probes the CPU with a few dozen `cpuid`
// instructions, and in a virtual machine each one traps to the
// hypervisor. On a nested VM (a CI runner, a Firecracker guest) that is
// 0.7 ms of CPU for every process the agent starts (`perf stat busybox
// true`); the musl build starts in 0.05 ms.
var busyboxSource = struct {
	Version          string // Debian's source version, without the epoch
	Orig, Debian     string // file names in the archive's pool
	OrigSHA, DebSHA  string
	Pool             string // the package's directory under the mirror
	Overrides        string // config lines ahead of Debian's: the first assignment wins
	Rev              int    // bumped when the build or the image's tree (busybox.go) changes
	Tools, Packages  []string
	KernelHeaderDirs []string // under /usr/include: what busybox includes beyond libc
}{
	Version: "1.35.0-4+deb12u1",
	Orig:    "busybox_1.35.0.orig.tar.bz2",
	OrigSHA: "faeeb244c35a348a334f4a59e44626ee870fb07b6884d68c10ae8bc19f83a694",
	Debian:  "busybox_1.35.0-4+deb12u1.debian.tar.xz",
	DebSHA:  "1cacbe095ef4880ea7879933c8e3c5075d1527cd6fbcb626a9b41e5daefd1a46",
	Pool:    "pool/main/b/busybox",
	// Two options need glibc's GNU regex API, which musl does not have:
	// grep and vi use POSIX regcomp instead (as Alpine's busybox does).
	// Debian leaves wget's -T out, but wget still parses -T as a number
	// and stores it through the NULL it passes for the missing option:
	// `wget -T 2 URL` dies of SIGSEGV in getopt32 (Debian's own
	// busybox-static too). With the option in, -T works as documented.
	Overrides: "# CONFIG_EXTRA_COMPAT is not set\n# CONFIG_FEATURE_VI_REGEX_SEARCH is not set\nCONFIG_FEATURE_WGET_TIMEOUT=y\n",
	Rev:       3,
	Tools:     []string{"musl-gcc", "make", "patch", "tar", "xz", "bzip2"},
	Packages:  []string{"musl-tools", "make", "patch", "xz-utils", "bzip2"},
	// linux-libc-dev's headers; musl-gcc leaves /usr/include out of the search.
	KernelHeaderDirs: []string{"linux", "asm-generic", "mtd"},
}

// muslBusyboxVersion names the built binary: source, patches, config and
// the build's own revision.
func muslBusyboxVersion() string {
	return "busybox-" + busyboxSource.Version + "-musl-" + strconv.Itoa(busyboxSource.Rev)
}

// muslBusybox returns the path of the musl busybox in the cache, building
// it first when missing: download (checked against the pinned SHA-256),
// Debian's patches, Debian's static config, make. About half a minute on
// two cores, once per version.
func muslBusybox(ctx context.Context, env Env) (string, error) {
	path := filepath.Join(env.cache(), muslBusyboxVersion(), "busybox")
	return path, cached(env, path, func(tmp string) error {
		if err := needTools(); err != nil {
			return err
		}
		src := busyboxSource
		dl := filepath.Join(env.cache(), "downloads")
		orig, err := download(ctx, env, src.Pool, src.Orig, src.OrigSHA, dl)
		if err != nil {
			return err
		}
		deb, err := download(ctx, env, src.Pool, src.Debian, src.DebSHA, dl)
		if err != nil {
			return err
		}
		dir := tmp + ".build"
		_ = os.RemoveAll(dir)
		defer os.RemoveAll(dir)
		env.logf("building busybox %s against musl (about 30 s, once; cached in %s)", src.Version, filepath.Dir(path))
		if err := buildBusybox(ctx, dir, orig, deb); err != nil {
			return fmt.Errorf("building busybox %s with musl: %w", src.Version, err)
		}
		bin, err := staticBusybox(filepath.Join(dir, "busybox"))
		if err != nil {
			return err
		}
		return os.WriteFile(tmp, bin, 0o755)
	})
}

// needTools names every missing build tool at once, with the packages
// that bring them.
func needTools() error {
	var missing []string
	for _, t := range busyboxSource.Tools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the default sandbox image builds busybox from Debian's source against musl, and this host lacks %s: apt-get install %s (or build the image from the host's glibc busybox-static: toolgate sandbox image --profile busybox-host)",
		strings.Join(missing, ", "), strings.Join(busyboxSource.Packages, " "))
}

// download fetches the pool file name into dir unless it is already
// there, and refuses content whose SHA-256 is not want.
func download(ctx context.Context, env Env, pool, name, want, dir string) (string, error) {
	path := filepath.Join(dir, name)
	return path, cached(env, path, func(tmp string) error {
		url := strings.TrimSuffix(mirror(), "/") + "/" + pool + "/" + name
		env.logf("downloading %s", url)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // it repeats the URL
		}
		if err != nil {
			return fmt.Errorf("downloading %s: %w", url, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("downloading %s: %s (toolgate pins this file; a mirror that no longer has it can be replaced with TOOLGATE_DEBIAN_MIRROR)", url, resp.Status)
		}
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(io.MultiWriter(f, h), resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("downloading %s: %w", url, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			return fmt.Errorf("downloading %s: SHA-256 %s, expected %s: refused", url, got, want)
		}
		return nil
	})
}

// buildBusybox unpacks, patches, configures and builds busybox in dir.
// Every step is a program run with its own arguments, no shell.
func buildBusybox(ctx context.Context, dir, orig, deb string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	run := func(stdin io.Reader, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Stdin = dir, stdin
		cmd.Env = append(os.Environ(), "KCONFIG_NOTIMESTAMP=1")
		return runTool(cmd, name+" "+strings.Join(args, " "))
	}
	if err := run(nil, "tar", "-xjf", orig, "--strip-components=1"); err != nil {
		return err
	}
	if err := run(nil, "tar", "-xJf", deb); err != nil {
		return err
	}
	series, err := os.ReadFile(filepath.Join(dir, "debian", "patches", "series"))
	if err != nil {
		return err
	}
	for p := range strings.Lines(string(series)) {
		p = strings.TrimSpace(p)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if err := run(nil, "patch", "-p1", "--batch", "-i", filepath.Join("debian", "patches", p)); err != nil {
			return err
		}
	}
	var config []byte
	config = append(config, busyboxSource.Overrides...)
	for _, f := range []string{"debian/config/os/linux", "debian/config/pkg/static"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		config = append(config, b...)
	}
	if err := os.WriteFile(filepath.Join(dir, ".config"), config, 0o644); err != nil {
		return err
	}
	// Options new to this source take their defaults, as Debian's build does.
	if err := run(newlines{}, "make", "silentoldconfig"); err != nil {
		return err
	}
	headers, err := kernelHeaders(filepath.Join(dir, "kernel-headers"))
	if err != nil {
		return err
	}
	// The banner names the source, as Debian's does, instead of the hour of
	// the build: the same source and compiler give the same binary.
	return run(nil, "make", "-j"+strconv.Itoa(runtime.NumCPU()), "CC=musl-gcc",
		"EXTRA_CFLAGS=-isystem "+headers, "BB_EXTRA_VERSION=Debian "+busyboxSource.Version+", musl", "busybox")
}

// kernelHeaders makes dir a header directory with only the kernel's
// headers in it (links into /usr/include): the whole of /usr/include
// would put glibc's headers ahead of musl's.
func kernelHeaders(dir string) (string, error) {
	multiarch := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	if multiarch == "" {
		return "", fmt.Errorf("building busybox on %s is not supported; use --profile busybox-host", runtime.GOARCH)
	}
	links := map[string]string{"asm": filepath.Join("/usr/include", multiarch, "asm")}
	for _, d := range busyboxSource.KernelHeaderDirs {
		links[d] = filepath.Join("/usr/include", d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, target := range links {
		if _, err := os.Stat(target); err != nil {
			return "", fmt.Errorf("kernel headers: %w (apt-get install linux-libc-dev)", err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// newlines answers every configuration question with its default.
type newlines struct{}

func (newlines) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '\n'
	}
	return len(p), nil
}
