package guest

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testenv/probe"
)

const module = probe.Module

// inSandbox are the Go binaries that run inside every sandbox. The other,
// toolgate-launch, is C with musl alone (internal/guest/launcher: TestStatic).
var inSandbox = []string{module + "/cmd/toolgate-client"}

// sandboxSide is everything of ours they may link: the sandbox's own code
// and the protocol leaf. A whitelist, so a new package is refused until
// someone decides it belongs in a sandbox.
var sandboxSide = []string{
	module + "/cmd/toolgate-client",
	module + "/internal/guest",
	module + "/internal/proto",
	module + "/internal/proto/hooks", // the hook client's half: input, answers, spool
	module + "/internal/lib/sse",     // the MCP door's event streams
}

// The in-sandbox binaries link only sandbox-side packages and the standard
// library: not the gateway's servers, the egress guard, the Docker backend,
// nor any third-party module (and so no cgo from one).
func TestInSandboxDeps(t *testing.T) {
	for _, b := range probe.LinksBeyond(t, sandboxSide, inSandbox...) {
		t.Errorf("an in-sandbox binary links %s", b)
	}
}
