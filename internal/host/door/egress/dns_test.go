package egress

import (
	"context"
	"net/netip"
	"testing"

	"github.com/toolgate/toolgate/internal/host/door/egress/dnstest"
)

func TestDNSServerAnswers(t *testing.T) {
	want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	s := dnstest.New(t, func(string, uint16, int) []netip.Addr { return want })
	got, err := s.Resolver().LookupNetIP(context.Background(), "ip", "both.test")
	if err != nil {
		t.Fatal(err)
	}
	set := map[netip.Addr]bool{}
	for _, a := range got {
		set[a.Unmap()] = true
	}
	if len(set) != 2 || !set[want[0]] || !set[want[1]] {
		t.Fatalf("got %v, want %v", got, want)
	}
	if s.Count("both.test", dnstest.TypeA) != 1 || s.Count("both.test", dnstest.TypeAAAA) != 1 {
		t.Fatalf("queries: %v", s.Queries())
	}
}
