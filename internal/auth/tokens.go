// Package auth holds the gateway's bearer tokens: generated once, shown once,
// stored only as hashes, checked in constant time.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Scope says what a token may reach.
type Scope string

const ScopeAdmin Scope = "admin"

// tokenPrefix makes tokens recognisable in a leaked-secret scan.
const tokenPrefix = "tg_"

// Token is a stored token: never the secret itself.
type Token struct {
	ID       string     `json:"id"`
	Scope    Scope      `json:"scope"`
	Agent    string     `json:"agent,omitempty"`
	Hash     string     `json:"hash"`
	Created  time.Time  `json:"created"`
	Expires  *time.Time `json:"expires,omitempty"`
	LastUsed *time.Time `json:"lastUsed,omitempty"`
}

// ErrUnauthorized is returned for any token that does not grant the request;
// callers never learn which check failed.
var ErrUnauthorized = errors.New("unauthorized")

// Store is a file of hashed tokens (0600).
type Store struct {
	path string
	mu   sync.Mutex
	toks []*Token
}

// OpenStore loads the token file, or starts an empty store when it is absent.
func OpenStore(path string) (*Store, error) {
	s := &Store{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &s.toks); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Create makes a new token and returns its secret, which is not kept.
func (s *Store) Create(scope Scope, agent string, ttl time.Duration) (secret string, tok *Token, err error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, err
	}
	secret = tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	now := time.Now().UTC()
	tok = &Token{ID: hex.EncodeToString(id), Scope: scope, Agent: agent, Hash: hashToken(secret), Created: now}
	if ttl > 0 {
		exp := now.Add(ttl)
		tok.Expires = &exp
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.toks = append(s.toks, tok)
	return secret, tok, s.saveLocked()
}

// Authenticate returns the token matching secret when it is valid for scope.
func (s *Store) Authenticate(secret string, scope Scope) (*Token, error) {
	if !strings.HasPrefix(secret, tokenPrefix) {
		return nil, ErrUnauthorized
	}
	h := hashToken(secret)
	now := time.Now().UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.toks {
		if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(h)) != 1 {
			continue
		}
		if t.Scope != scope || (t.Expires != nil && now.After(*t.Expires)) {
			return nil, ErrUnauthorized
		}
		t.LastUsed = &now
		return t, nil
	}
	return nil, ErrUnauthorized
}

func (s *Store) saveLocked() error {
	b, err := json.MarshalIndent(s.toks, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

func hashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// BearerToken extracts the token from an Authorization header value.
func BearerToken(header string) (string, bool) {
	const p = "Bearer "
	if len(header) <= len(p) || !strings.EqualFold(header[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(header[len(p):]), true
}

// StoreFile is the token store's name inside the toolgate home.
const StoreFile = "tokens.json"
