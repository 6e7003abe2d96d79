package netrule

import (
	"net/netip"
	"strings"
	"testing"
)

// The pure decision functions, as the gateway's pipeline calls them.
func TestPolicyVetIsPure(t *testing.T) {
	t.Parallel()
	p := &Policy{}
	if d := p.Vet([]netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("2606:4700::1111")}, nil); !d.Allow {
		t.Errorf("global answer refused: %+v", d)
	}
	if d := p.Vet([]netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("192.168.1.1")}, nil); d.Rule != RuleMixed ||
		!strings.Contains(d.Reason, "8.8.8.8") || !strings.Contains(d.Reason, "192.168.1.1") {
		t.Errorf("mixed: %+v", d)
	}
}
