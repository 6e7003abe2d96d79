// Package launcher builds toolgate-launch, the launcher behind every
// /tools/bin/NAME in a sandbox (its exit codes are in internal/proto). The launcher is
// a static C program (c/launch.c, built with musl by c/build.sh): every
// plugin call starts it, and a Go program's runtime start alone costs about
// 1 ms of CPU, more than the call's whole round trip to the gateway
// (issue 13). Its protocol is docs/protocol.md's "The launcher"; this
// package's tests run the built binary against a real agent socket and fuzz
// its response reader (c/fuzz_response.c).
package launcher

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Source is the directory of the launcher's C source and build script,
// in the source tree this package was compiled from.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "c")
}

// Build compiles the launcher into out with c/build.sh (musl-gcc from
// Debian's musl-tools; MUSL_GCC names another).
func Build(out string) error {
	cmd := exec.Command("sh", filepath.Join(Source(), "build.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building toolgate-launch (needs musl-tools): %v\n%s", err, b)
	}
	return nil
}
