package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// dnsServer is a tiny scripted DNS server on 127.0.0.1 (UDP). answer gets
// the query name, its type (1 = A, 28 = AAAA) and how many queries of that
// name and type came before; it returns the addresses to answer with (and
// may block to play a slow server).
type dnsServer struct {
	pc      net.PacketConn
	answer  func(name string, qtype uint16, n int) []netip.Addr
	mu      sync.Mutex
	queries map[string]int // "name/type" → count
}

const (
	typeA    = 1
	typeAAAA = 28
)

func newDNSServer(t *testing.T, answer func(name string, qtype uint16, n int) []netip.Addr) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{pc: pc, answer: answer, queries: map[string]int{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := append([]byte(nil), buf[:n]...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if resp, err := s.respond(q); err == nil {
					pc.WriteTo(resp, from)
				}
			}()
		}
	}()
	return s
}

// count returns how many queries of one type the server saw for a name.
func (s *dnsServer) count(name string, qtype uint16) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[key(name, qtype)]
}

func key(name string, qtype uint16) string {
	return name + "/" + map[uint16]string{typeA: "A", typeAAAA: "AAAA"}[qtype]
}

// respond parses the single question and builds the answer; the EDNS
// record Go's resolver adds in the additional section is ignored.
func (s *dnsServer) respond(q []byte) ([]byte, error) {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil, errors.New("want one question")
	}
	var labels []string
	i := 12
	for {
		if i >= len(q) {
			return nil, errors.New("short name")
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if i+l > len(q) {
			return nil, errors.New("short label")
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil, errors.New("short question")
	}
	qtype := binary.BigEndian.Uint16(q[i:])
	question := q[12 : i+4]
	name := strings.ToLower(strings.Join(labels, "."))

	s.mu.Lock()
	k := key(name, qtype)
	n := s.queries[k]
	s.queries[k]++
	s.mu.Unlock()

	var rrs [][]byte
	for _, a := range s.answer(name, qtype, n) {
		var rdata []byte
		switch {
		case qtype == typeA && a.Is4():
			b := a.As4()
			rdata = b[:]
		case qtype == typeAAAA && a.Is6():
			b := a.As16()
			rdata = b[:]
		default:
			continue
		}
		rr := []byte{0xc0, 12} // pointer to the question's name
		rr = binary.BigEndian.AppendUint16(rr, qtype)
		rr = binary.BigEndian.AppendUint16(rr, 1) // IN
		rr = binary.BigEndian.AppendUint32(rr, 60)
		rr = binary.BigEndian.AppendUint16(rr, uint16(len(rdata)))
		rrs = append(rrs, append(rr, rdata...))
	}
	resp := append([]byte{}, q[0], q[1], 0x81, 0x80, 0, 1)
	resp = binary.BigEndian.AppendUint16(resp, uint16(len(rrs)))
	resp = append(resp, 0, 0, 0, 0)
	resp = append(resp, question...)
	for _, rr := range rrs {
		resp = append(resp, rr...)
	}
	return resp, nil
}

// resolver returns a pure-Go resolver that only ever talks to this server.
func (s *dnsServer) resolver() *net.Resolver {
	addr := s.pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func TestDNSServerAnswers(t *testing.T) {
	want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	s := newDNSServer(t, func(string, uint16, int) []netip.Addr { return want })
	got, err := s.resolver().LookupNetIP(context.Background(), "ip", "both.test")
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
	if s.count("both.test", typeA) != 1 || s.count("both.test", typeAAAA) != 1 {
		t.Fatalf("queries: %v", s.queries)
	}
}
