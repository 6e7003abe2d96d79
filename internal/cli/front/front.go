// Package front builds toolgate (c/front.c, with the protocol's C client,
// internal/proto/cclient), the CLI's front: it makes `toolgate exec`
// itself over the admin API and hands every other command line to the Go
// CLI, CLIBinary, installed beside it. Its tests hold it to the Go CLI:
// the same request, output and exit status for every exec it makes, every
// other command line handed on untouched.
package front

import (
	"path/filepath"
	"runtime"

	"github.com/toolgate/toolgate/internal/proto/cclient"
)

// CLIBinary is the Go CLI (cmd/toolgate-cli), which the front runs for
// every command line but the execs it makes itself.
const CLIBinary = "toolgate-cli"

// Source is c/front.c, in the source tree this package was compiled from.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "c", "front.c")
}

// Build compiles toolgate, the front, into out.
func Build(out string) error { return cclient.Build(Source(), out) }
