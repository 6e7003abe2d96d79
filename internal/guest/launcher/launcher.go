// Package launcher builds toolgate-launch (c/launch.c, with the protocol's
// C client, internal/proto/cclient), the launcher behind every
// /tools/bin/NAME in a sandbox: every plugin call starts it. Its protocol
// is docs/protocol.md's "The launcher"; its exit codes are internal/proto's.
// This package's tests run the built program against a real agent socket
// and fuzz the answer's reader (c/fuzz_response.c).
package launcher

import (
	"path/filepath"
	"runtime"

	"github.com/toolgate/toolgate/internal/proto/cclient"
)

// Source is c/launch.c, in the source tree this package was compiled from.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "c", "launch.c")
}

// Build compiles toolgate-launch into out.
func Build(out string) error { return cclient.Build(Source(), out) }
