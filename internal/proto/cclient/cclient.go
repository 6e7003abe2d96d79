// Package cclient is the protocol's client in C: client.c, the dial and
// the reader of the gateway's answer (Go's JSON string encoding, growable
// buffers), which toolgate's two C programs include — the sandbox's
// launcher (internal/guest/launcher) and the CLI's front (internal/cli/front).
// They are C because a Go program's runtime start and exit alone cost 1-2 ms
// of CPU, more than a call's whole round trip to the gateway (issue 13).
// This package builds them (build.sh, the one recipe) and reads the names
// and numbers they define, which their tests hold to the Go side's.
package cclient

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
)

// Dir is the directory of client.c and build.sh (c/: C files beside Go
// ones would be cgo's), in the source tree this package was compiled from.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "c")
}

// Build compiles the C program src into out with build.sh (musl-gcc from
// Debian's musl-tools; MUSL_GCC names another).
func Build(src, out string) error {
	cmd := exec.Command("sh", filepath.Join(Dir(), "build.sh"), src, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s (needs musl-tools): %v\n%s", filepath.Base(out), err, b)
	}
	return nil
}

// Define is the value of `#define name VALUE` in src, unquoted when it is
// a C string; false when src defines no name.
func Define(src []byte, name string) (string, bool) {
	m := regexp.MustCompile(`(?m)^#define ` + regexp.QuoteMeta(name) + ` (.+?)\s*(/\*.*)?$`).FindSubmatch(src)
	if m == nil {
		return "", false
	}
	s := string(m[1])
	if u, err := strconv.Unquote(s); err == nil {
		return u, true
	}
	return s, true
}

// Enum is the value of enumerator `name = N,` in src.
func Enum(src []byte, name string) (int, bool) {
	m := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + ` = (\d+),`).FindSubmatch(src)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(string(m[1]))
	return n, err == nil
}
