package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStoreCreateAuthenticate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens.json")
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	secret, tok, err := s.Create(ScopeAdmin, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), secret) {
		t.Fatal("token file holds the secret")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v", fi.Mode().Perm())
	}
	// A second store sees the same token: it survives a restart.
	s2, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Authenticate(secret, ScopeAdmin)
	if err != nil || got.ID != tok.ID {
		t.Fatalf("authenticate: %v %v", got, err)
	}
	for name, try := range map[string]func() error{
		"wrong scope": func() error { _, err := s2.Authenticate(secret, "mcp"); return err },
		"wrong token": func() error { _, err := s2.Authenticate(secret+"x", ScopeAdmin); return err },
		"no prefix":   func() error { _, err := s2.Authenticate("abc", ScopeAdmin); return err },
		"empty":       func() error { _, err := s2.Authenticate("", ScopeAdmin); return err },
	} {
		if err := try(); err != ErrUnauthorized {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestExpiredToken(t *testing.T) {
	t.Parallel()
	s, _ := OpenStore(filepath.Join(t.TempDir(), "t.json"))
	secret, _, err := s.Create(ScopeAdmin, "", time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	if _, err := s.Authenticate(secret, ScopeAdmin); err != ErrUnauthorized {
		t.Fatalf("expired token accepted: %v", err)
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc ", "abc", true},
		{"Bearer ", "", false},
		{"Basic abc", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := BearerToken(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("BearerToken(%q) = %q,%v", c.in, got, ok)
		}
	}
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	s, _ := OpenStore(filepath.Join(t.TempDir(), "t.json"))
	cases := []struct {
		scope Scope
		agent string
		ttl   time.Duration
		ok    bool
	}{
		{ScopeAdmin, "", 0, true},
		{ScopeAdmin, "demo", 0, false},
		{ScopeMCP, "demo", time.Hour, true},
		{ScopeMCP, "", 0, false},
		{ScopeSkills, "", 0, true},
		{ScopeSkills, "demo", 0, true},
		{ScopeViewer, "", 0, true},
		{ScopeViewer, "demo", 0, false},
		{"root", "", 0, false},
		{ScopeSkills, "", -time.Hour, false},
	}
	for _, c := range cases {
		_, _, err := s.Create(c.scope, c.agent, c.ttl)
		if (err == nil) != c.ok {
			t.Errorf("Create(%q, %q, %v): err=%v, want ok=%v", c.scope, c.agent, c.ttl, err, c.ok)
		}
	}
}

// TestRevokeAcrossProcesses: the CLI and the daemon each hold a Store on the
// same file; a revocation or creation by one takes effect in the other at the
// next request, and neither loses the other's writes.
func TestRevokeAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens.json")
	daemon, _ := OpenStore(path)
	cli, _ := OpenStore(path)
	secret, tok, err := cli.Create(ScopeMCP, "demo", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := daemon.Lookup(secret)
	if err != nil || got.Agent != "demo" || got.Scope != ScopeMCP {
		t.Fatalf("daemon did not see the new token: %v %v", got, err)
	}
	// The daemon writes last-used times back; the CLI's next create must survive it.
	secret2, _, err := cli.Create(ScopeSkills, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	daemon.flushUsedLocked(time.Now())
	if _, err := daemon.Lookup(secret2); err != nil {
		t.Fatal("token created by the CLI lost:", err)
	}
	list, err := cli.List()
	if err != nil || len(list) != 2 || list[0].Hash != "" || list[0].LastUsed == nil {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := cli.Revoke(tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.Lookup(secret); err != ErrUnauthorized {
		t.Fatalf("revoked token still accepted: %v", err)
	}
	if err := cli.Revoke(tok.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), secret2) {
		t.Fatal("secret written to the file")
	}
}

func TestRequire(t *testing.T) {
	t.Parallel()
	s, _ := OpenStore(filepath.Join(t.TempDir(), "t.json"))
	admin, _, _ := s.Create(ScopeAdmin, "", 0)
	mcp, _, _ := s.Create(ScopeMCP, "a", 0)
	skills, _, _ := s.Create(ScopeSkills, "", 0)
	expired, _, _ := s.Create(ScopeMCP, "a", time.Nanosecond)
	time.Sleep(time.Millisecond)
	var refused []string
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := TokenFrom(r.Context())
		w.Write([]byte(string(tok.Scope) + ":" + tok.Agent))
	})
	onRefuse := func(r *http.Request, reason string) { refused = append(refused, reason) }
	mcpRoute := Require(s, ScopeMCP, RequireOptions{OnRefuse: onRefuse,
		Also: map[Scope]func(*http.Request) bool{ScopeSkills: func(r *http.Request) bool { return r.URL.Path == "/resources" }}})(ok)
	adminRoute := Require(s, ScopeAdmin, RequireOptions{OnRefuse: onRefuse})(ok)
	cases := []struct {
		name  string
		route http.Handler
		path  string
		auth  string
		want  string // body; "" means 401
	}{
		{"mcp token on mcp route", mcpRoute, "/tools", "Bearer " + mcp, "mcp:a"},
		{"skills token, opted-in request", mcpRoute, "/resources", "Bearer " + skills, "skills:"},
		{"skills token, other request", mcpRoute, "/tools", "Bearer " + skills, ""},
		{"admin token on mcp route", mcpRoute, "/tools", "Bearer " + admin, ""},
		{"mcp token on admin route", adminRoute, "/", "Bearer " + mcp, ""},
		{"skills token on admin route", adminRoute, "/", "Bearer " + skills, ""},
		{"admin token on admin route", adminRoute, "/", "Bearer " + admin, "admin:"},
		{"no token", adminRoute, "/", "", ""},
		{"malformed", adminRoute, "/", "Bearer not-a-token", ""},
		{"basic auth", adminRoute, "/", "Basic " + admin, ""},
		{"expired", mcpRoute, "/tools", "Bearer " + expired, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", c.path, nil)
			if c.auth != "" {
				r.Header.Set("Authorization", c.auth)
			}
			w := httptest.NewRecorder()
			c.route.ServeHTTP(w, r)
			if c.want == "" {
				if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
					t.Fatalf("got %d %q, want 401", w.Code, w.Body)
				}
				if strings.Contains(w.Body.String(), "tg_") {
					t.Fatal("response echoes a token")
				}
				return
			}
			if w.Code != 200 || w.Body.String() != c.want {
				t.Fatalf("got %d %q, want %q", w.Code, w.Body, c.want)
			}
		})
	}
	for _, r := range refused {
		if strings.Contains(r, "tg_") {
			t.Fatalf("refusal reason holds a token: %q", r)
		}
	}
}

// TestLastUsedRecordedAtOnce: a token's first use shows in another
// process's list right away, not only after a later use a minute on.
func TestLastUsedRecordedAtOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), StoreFile)
	daemon, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	// Two tokens used moments apart: the second's use must not wait for a
	// later request a minute on to reach the file.
	for _, agent := range []string{"a", "b"} {
		secret, _, err := cli.Create(ScopeMCP, agent, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := daemon.Lookup(secret); err != nil {
			t.Fatal(err)
		}
	}
	list, err := cli.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	for _, tok := range list {
		if tok.LastUsed == nil || time.Since(*tok.LastUsed) > time.Minute {
			t.Errorf("token %s (agent %s): last used %v", tok.ID, tok.Agent, tok.LastUsed)
		}
	}
}
