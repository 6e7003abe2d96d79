package mcp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/host/auth"
)

// sessionCount is the number of sessions the SDK holds for agent a.
func sessionCount(f *fixture) int {
	n := 0
	for range f.door.door(Identity{Agent: "a"}).server.Sessions() {
		n++
	}
	return n
}

// holdStream opens the session's event stream (GET) and keeps it open until
// the test ends: a session in use.
func holdStream(t *testing.T, f *fixture, secret, sid string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Mcp-Session-Id", sid)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body) // until the test cancels it
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	table := f.door.door(Identity{Agent: "a"}).sessions
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		table.mu.Lock()
		u := table.use[sid]
		inUse := u != nil && u.inFlight > 0
		table.mu.Unlock()
		if inUse {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event stream never opened: %v %v", table.use, sid)
		}
	}
}

// An agent that calls initialize in a loop (the flood that once made
// 111,607 sessions in 30 s) holds at most MaxSessions: each new session
// closes the one idle longest, never one in use, and other agents are
// unaffected.
func TestSessionCapPerIdentity(t *testing.T) {
	const max = 3
	f := newFixture(t, testConfig, Options{MaxSessions: max})
	secret := f.token(t, auth.ScopeMCP, "a")
	ping := func(sid string) int {
		resp, _ := post(t, f.url, secret, sid, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
		return resp.StatusCode
	}
	live := rawSession(t, f, secret)
	holdStream(t, f, secret, live)
	s2 := rawSession(t, f, secret)
	s3 := rawSession(t, f, secret)
	if code := ping(s2); code != 200 { // s3 is now the one idle longest
		t.Fatalf("ping s2: %d", code)
	}
	s4 := rawSession(t, f, secret)
	if n := sessionCount(f); n != max {
		t.Fatalf("%d sessions after the fourth, want %d", n, max)
	}
	if code := ping(s3); code != http.StatusNotFound {
		t.Fatalf("the idlest session was not the one closed: ping s3 = %d", code)
	}
	for _, sid := range []string{live, s2, s4} {
		if code := ping(sid); code != 200 {
			t.Fatalf("a session that should stay was closed: ping = %d", code)
		}
	}

	// The flood: every initialize still gets a session (the idlest goes),
	// the count stays at the cap, the session in use survives.
	for i := range 200 {
		resp, body := post(t, f.url, secret, "", initBody)
		if resp.StatusCode != 200 {
			t.Fatalf("initialize %d: %d %s", i, resp.StatusCode, body)
		}
		if n := sessionCount(f); n > max {
			t.Fatalf("%d sessions after %d initializes, cap %d", n, i+1, max)
		}
	}
	// The same from two clients at once: every session made is tracked, so
	// it can be closed for a later one.
	var wg sync.WaitGroup
	codes := make(chan int, 200)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				resp, _ := post(t, f.url, secret, "", initBody)
				codes <- resp.StatusCode
			}
		}()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Fatalf("initialize from two clients at once: %d", code)
		}
	}
	table := f.door.door(Identity{Agent: "a"}).sessions
	table.mu.Lock()
	tracked := len(table.use)
	table.mu.Unlock()
	if n := sessionCount(f); n > max || n != tracked {
		t.Fatalf("%d sessions, %d of them tracked, cap %d", n, tracked, max)
	}
	if code := ping(live); code != 200 {
		t.Fatalf("the session in use was closed by the flood: ping = %d", code)
	}

	// With every session in use, a new one is refused, not made.
	var inUse []string
	for range max - 1 {
		sid := rawSession(t, f, secret)
		holdStream(t, f, secret, sid)
		inUse = append(inUse, sid)
	}
	resp, body := post(t, f.url, secret, "", initBody)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "too many MCP sessions") {
		t.Fatalf("initialize with every session in use: %d %s", resp.StatusCode, body)
	}
	if n := sessionCount(f); n != max {
		t.Fatalf("%d sessions, want %d", n, max)
	}
	// Another agent has sessions of its own.
	if _, err := f.connect(t, f.token(t, auth.ScopeMCP, "b"), nil); err != nil {
		t.Fatalf("agent b: %v", err)
	}
}

// What a session keeps is bounded: its initialize parameters by the size of
// the request, its subscriptions by the skills it can see.
func TestSessionMemoryBounded(t *testing.T) {
	f := newFixture(t, testConfig, Options{})
	secret := f.token(t, auth.ScopeMCP, "a")
	writeSkill(t, f.home, "skills/one", "---\nname: one\ndescription: first\n---\n")
	f.door.skills.scan()
	huge := strings.Replace(initBody, `"name":"raw"`, `"name":"`+strings.Repeat("x", maxInitializeBody)+`"`, 1)
	if resp, body := post(t, f.url, secret, "", huge); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("initialize of %d bytes: %d %s", len(huge), resp.StatusCode, body)
	}
	if n := sessionCount(f); n != 0 {
		t.Fatalf("%d sessions from a refused initialize", n)
	}
	cs := f.mustConnect(t, secret)
	if err := cs.Subscribe(context.Background(), &sdk.SubscribeParams{URI: "skill://global/one"}); err != nil {
		t.Fatalf("subscribing to a skill: %v", err)
	}
	if err := cs.Subscribe(context.Background(), &sdk.SubscribeParams{URI: "skill://global/nope"}); err == nil {
		t.Fatal("subscribed to a skill that does not exist")
	}
}
