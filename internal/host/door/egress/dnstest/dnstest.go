// Package dnstest is a tiny scripted DNS server on 127.0.0.1 for tests of
// the egress guard: no test reaches a real resolver.
package dnstest

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

// Server is a tiny scripted DNS server on 127.0.0.1 (UDP). answer gets
// the query name, its type (1 = A, 28 = AAAA) and how many queries of that
// name and type came before; it returns the addresses to answer with (and
// may block to play a slow server).
type Server struct {
	pc      net.PacketConn
	answer  func(name string, qtype uint16, n int) []netip.Addr
	mu      sync.Mutex
	queries map[string]int // "name/type" → count
}

// Query types.
const (
	TypeA    = 1
	TypeAAAA = 28
)

// New starts a server answering with answer until t ends.
func New(t testing.TB, answer func(name string, qtype uint16, n int) []netip.Addr) *Server {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{pc: pc, answer: answer, queries: map[string]int{}}
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

// Count returns how many queries of one type the server saw for a name.
func (s *Server) Count(name string, qtype uint16) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[key(name, qtype)]
}

func key(name string, qtype uint16) string {
	return name + "/" + map[uint16]string{TypeA: "A", TypeAAAA: "AAAA"}[qtype]
}

// respond parses the single question and builds the answer; the EDNS
// record Go's resolver adds in the additional section is ignored.
func (s *Server) respond(q []byte) ([]byte, error) {
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
		case qtype == TypeA && a.Is4():
			b := a.As4()
			rdata = b[:]
		case qtype == TypeAAAA && a.Is6():
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

// Addr is the server's ip:port (gateway.egress.resolver).
func (s *Server) Addr() string { return s.pc.LocalAddr().String() }

// Queries is how many queries the server answered in all.
func (s *Server) Queries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.queries {
		n += c
	}
	return n
}

// Resolver returns a pure-Go resolver that only ever talks to this server.
func (s *Server) Resolver() *net.Resolver {
	addr := s.pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}
