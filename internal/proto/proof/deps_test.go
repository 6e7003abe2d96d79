package proof

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// The standalone verifier is what a customer builds and reads to trust a
// receipt: it links this package, the standard library and x/mod's note
// and tlog, nothing else of ours or anyone's.
func TestVerifierDeps(t *testing.T) {
	allowed := []string{probe.Module + "/cmd/toolgate-verify", probe.Module + "/internal/proto/proof",
		"golang.org/x/mod/sumdb/note", "golang.org/x/mod/sumdb/tlog"}
	for _, b := range probe.LinksBeyond(t, allowed, probe.Module+"/cmd/toolgate-verify") {
		t.Errorf("toolgate-verify links %s", b)
	}
}
