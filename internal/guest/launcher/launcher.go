// Package launcher builds toolgate's two static C programs (c/, built with
// musl by c/build.sh; their exit codes are in internal/proto and
// internal/cli):
//
//   - toolgate-launch (c/launch.c), the launcher behind every
//     /tools/bin/NAME in a sandbox: every plugin call starts it. Its
//     protocol is docs/protocol.md's "The launcher".
//   - toolgate (c/front.c), the CLI's front: it makes `toolgate exec` itself
//     over the admin API and hands every other command line to the Go CLI,
//     CLIBinary, installed beside it.
//
// Both are C because a Go program's runtime start and exit alone cost
// 1-2 ms of CPU, more than the call's whole round trip to the gateway
// (issue 13). They share c/client.c: the dial and the reader of the
// gateway's answer, whose fuzz target is c/fuzz_response.c. This package's
// tests run the built programs against a real agent socket, hold the front
// to the Go CLI's requests and outcomes, and fuzz the reader.
package launcher

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// The programs Build makes.
const (
	Launcher = "launch" // toolgate-launch
	Front    = "front"  // toolgate
)

// CLIBinary is the Go CLI (cmd/toolgate-cli), which the front runs for
// every command line but the execs it makes itself.
const CLIBinary = "toolgate-cli"

// Source is the directory of the C sources and build script, in the
// source tree this package was compiled from.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "c")
}

// Build compiles program (Launcher or Front) into out with c/build.sh
// (musl-gcc from Debian's musl-tools; MUSL_GCC names another).
func Build(program, out string) error {
	cmd := exec.Command("sh", filepath.Join(Source(), "build.sh"), program, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s (needs musl-tools): %v\n%s", filepath.Base(out), err, b)
	}
	return nil
}
