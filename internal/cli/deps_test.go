package cli

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// toolgateLinks is everything beyond the standard library that the Go CLI,
// toolgate-cli, may link. Its client commands start in about a millisecond
// because it links nothing with costly initialisers (CEL, protobuf, the
// Docker and Kubernetes clients, the MCP SDK, SQLite, pgx, Prometheus,
// YAML): commands that need them belong in gatewaycmd.
var toolgateLinks = []string{
	"github.com/spf13/cobra",
	"github.com/spf13/pflag",
	"github.com/toolgate/toolgate/cmd/toolgate-cli",
	"github.com/toolgate/toolgate/internal/cli/adminclient",
	"github.com/toolgate/toolgate/internal/proto/auditquery",
	"github.com/toolgate/toolgate/internal/cli",
	"github.com/toolgate/toolgate/internal/proto/api",
	"github.com/toolgate/toolgate/internal/proto/hooks",
	"github.com/toolgate/toolgate/internal/proto",
	"github.com/toolgate/toolgate/internal/lib/textsafe",
}

// toolgateNeverLinks are standard packages toolgate-cli must not
// link: net/http (with crypto/tls, x509, HTTP/2's tables) cost each CLI
// run ~0.3 ms of CPU linked and initialised even unused; adminclient
// speaks the HTTP it needs itself.
var toolgateNeverLinks = []string{"net/http", "crypto/tls"}

// TestToolgateDeps fails naming any other package that enters toolgate-cli,
// and what imported it.
func TestToolgateDeps(t *testing.T) {
	for _, b := range probe.LinksBeyond(t, toolgateLinks, "github.com/toolgate/toolgate/cmd/toolgate-cli") {
		t.Errorf("toolgate-cli links %s: a command that needs it belongs in gatewaycmd", b)
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/toolgate/toolgate/cmd/toolgate-cli").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		if slices.Contains(toolgateNeverLinks, p) {
			t.Errorf("toolgate-cli links %s (go list -deps -json=ImportPath,Imports ./cmd/toolgate-cli shows who imports it)", p)
		}
	}
}
