package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/netrule"
)

func TestLimiter(t *testing.T) {
	l := NewLimiter(2)
	for range 2 {
		if err := l.Acquire("a"); err != nil {
			t.Fatal(err)
		}
	}
	err := l.Acquire("a")
	if !errors.Is(err, ErrTooManyConnections) || !strings.Contains(err.Error(), `agent "a"`) || !strings.Contains(err.Error(), "limit 2") {
		t.Errorf("third acquire: %v", err)
	}
	if err := l.Acquire("b"); err != nil {
		t.Errorf("other agent refused: %v", err)
	}
	l.Release("a")
	if err := l.Acquire("a"); err != nil {
		t.Errorf("acquire after release: %v", err)
	}
	if l.Open("a") != 2 || l.Open("b") != 1 {
		t.Errorf("open a=%d b=%d", l.Open("a"), l.Open("b"))
	}
	l.Release("a")
	l.Release("a")
	l.Release("b")
	if len(l.open) != 0 {
		t.Errorf("idle agents kept: %v", l.open)
	}
	defer func() {
		if recover() == nil {
			t.Error("Release without Acquire did not panic")
		}
	}()
	l.Release("a")
}

// A client opens 10,000 connections to a gateway-like server: limiter,
// guard, tunnel. At most max are ever held; the rest are refused with the
// limiter's error; silent held ones end at the idle timeout; nothing leaks.
func TestLimiter10000Connections(t *testing.T) {
	const (
		attempts = 10000
		max      = 16
		workers  = 32
	)
	upPort, _ := listen(t, outsideA)
	target := mustTarget(t, outsideA.String()+":"+strconv.Itoa(int(upPort)))
	guard := NewGuard(netrule.Policy{Allow: []netrule.Rule{{Host: target.Host, Port: target.Port}}}, Options{Classify: testOutside})
	lim := NewLimiter(max)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var (
		handlers          sync.WaitGroup
		peak, idleEnds    atomic.Int64
		refusedSrv, other atomic.Int64
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				if err := lim.Acquire("demo"); err != nil {
					refusedSrv.Add(1)
					io.WriteString(c, "refused: "+err.Error())
					c.Close()
					return
				}
				defer lim.Release("demo")
				for n := int64(lim.Open("demo")); ; {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				up, _, err := guard.Dial(context.Background(), target)
				if err != nil {
					other.Add(1)
					c.Close()
					return
				}
				if _, err := Tunnel(context.Background(), c, up, Limits{IdleTimeout: 100 * time.Millisecond}); errors.Is(err, ErrIdleTimeout) {
					idleEnds.Add(1)
				} else {
					other.Add(1)
				}
			}()
		}
	}()

	var refused, held, failed atomic.Int64
	var clients sync.WaitGroup
	next := atomic.Int64{}
	for range workers {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for next.Add(1) <= attempts {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					failed.Add(1)
					continue
				}
				// Silent client: sends nothing, reads until the server ends it.
				got, _ := io.ReadAll(c)
				c.Close()
				if strings.HasPrefix(string(got), "refused: ") && strings.Contains(string(got), "too many egress connections") {
					refused.Add(1)
				} else {
					held.Add(1)
				}
			}
		}()
	}
	clients.Wait()
	ln.Close()
	handlers.Wait()

	if failed.Load() != 0 || refused.Load()+held.Load() != attempts || refused.Load() != refusedSrv.Load() {
		t.Errorf("failed %d refused %d (server %d) held %d", failed.Load(), refused.Load(), refusedSrv.Load(), held.Load())
	}
	if refused.Load() == 0 || held.Load() < max {
		t.Errorf("refused %d held %d: the limit was never exercised", refused.Load(), held.Load())
	}
	if peak.Load() > max || idleEnds.Load() != held.Load() || other.Load() != 0 {
		t.Errorf("peak %d (max %d), idle ends %d of %d held, other ends %d", peak.Load(), max, idleEnds.Load(), held.Load(), other.Load())
	}
	if lim.Open("demo") != 0 {
		t.Errorf("%d slots leaked", lim.Open("demo"))
	}
}
