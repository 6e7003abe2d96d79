package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStoreCreateAuthenticate(t *testing.T) {
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
