// Package auth holds the gateway's bearer tokens: generated once, shown once,
// stored only as hashes, checked in constant time, each with one scope.
//
// The token file is shared between the daemon and the CLI (`toolgate token
// create/revoke` edit it directly) as a lockedfile: the daemon re-reads it
// whenever it changed on disk, so a revocation takes effect on the next request.
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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/lib/lockedfile"
)

// Scope says what a token may reach. Scopes are not ordered: a route names
// the scope it requires and, by opting in, the narrower ones it also takes.
type Scope string

const (
	// ScopeAdmin reaches the admin API.
	ScopeAdmin Scope = "admin"
	// ScopeMCP reaches the MCP door as the one agent the token is bound to.
	ScopeMCP Scope = "mcp"
	// ScopeSkills reaches only the skills resources of the MCP door (global
	// skills, plus the bound agent's when the token has one).
	ScopeSkills Scope = "skills"
	// ScopeViewer reaches only the read-only dashboard (/ui): it calls no
	// tool and changes nothing. No other route lists it, so every other
	// route refuses it.
	ScopeViewer Scope = "viewer"
)

// Scopes lists the valid scopes.
var Scopes = []Scope{ScopeAdmin, ScopeMCP, ScopeSkills, ScopeViewer}

// tokenPrefix makes tokens recognisable in a leaked-secret scan.
const tokenPrefix = "tg_"

// usedFlushEvery bounds how often a token's last-used time is written back:
// often enough to answer "is this token still in use", rarely enough that a
// busy client does not turn every request into a file write.
const usedFlushEvery = time.Minute

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

// Expired reports whether the token's lifetime ended before now.
func (t *Token) Expired(now time.Time) bool { return t.Expires != nil && now.After(*t.Expires) }

// ErrUnauthorized is returned for any token that does not grant the request;
// callers never learn which check failed.
var ErrUnauthorized = errors.New("unauthorized")

// ErrNotFound is returned by Revoke for an unknown id.
var ErrNotFound = errors.New("no such token")

// Store is a file of hashed tokens (0600).
type Store struct {
	file *lockedfile.File[[]*Token]
	mu   sync.Mutex // guards used and flushed
	// used holds last-used times not yet written back, by token id.
	used    map[string]time.Time
	flushed time.Time
}

// OpenStore loads the token file, or starts an empty store when it is absent.
func OpenStore(path string) (*Store, error) {
	f, err := lockedfile.Open(path, parseTokens)
	if err != nil {
		return nil, err
	}
	return &Store{file: f, used: map[string]time.Time{}}, nil
}

func parseTokens(b []byte) ([]*Token, error) {
	var toks []*Token
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, nil
	}
	err := json.Unmarshal(b, &toks)
	return toks, err
}

// Create makes a new token and returns its secret, which is not kept. An mcp
// token must name its agent; an admin or viewer token must not; a skills
// token may.
func (s *Store) Create(scope Scope, agent string, ttl time.Duration) (secret string, tok *Token, err error) {
	switch {
	case !slices.Contains(Scopes, scope):
		return "", nil, fmt.Errorf("unknown scope %q (want one of admin, mcp, skills, viewer)", scope)
	case scope == ScopeMCP && agent == "":
		return "", nil, errors.New("an mcp token is bound to one agent: give --agent")
	case (scope == ScopeAdmin || scope == ScopeViewer) && agent != "":
		return "", nil, fmt.Errorf("an %s token is not bound to an agent", scope)
	case ttl < 0:
		return "", nil, errors.New("ttl must not be negative")
	}
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
	err = s.file.Edit(func(toks []*Token) ([]*Token, error) { return append(toks, tok), nil })
	if err != nil {
		return "", nil, err
	}
	return secret, tok, nil
}

// List returns the stored tokens (hashes blanked), oldest first.
func (s *Store) List() ([]Token, error) {
	var out []Token
	err := s.file.Read(func(toks []*Token) {
		out = make([]Token, 0, len(toks))
		for _, t := range toks {
			c := *t
			c.Hash = ""
			out = append(out, c)
		}
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range out {
		if u, ok := s.used[out[i].ID]; ok && (out[i].LastUsed == nil || u.After(*out[i].LastUsed)) {
			out[i].LastUsed = &u
		}
	}
	return out, nil
}

// Revoke deletes the token with the given id; the next request carrying it
// is refused, in this process and in a daemon sharing the file.
func (s *Store) Revoke(id string) error {
	return s.file.Edit(func(toks []*Token) ([]*Token, error) {
		i := slices.IndexFunc(toks, func(t *Token) bool { return t.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return slices.Delete(toks, i, i+1), nil
	})
}

// Authenticate returns the token matching secret when it is valid for scope.
func (s *Store) Authenticate(secret string, scope Scope) (*Token, error) {
	t, err := s.Lookup(secret)
	if err != nil || t.Scope != scope {
		return nil, ErrUnauthorized
	}
	return t, nil
}

// Lookup returns the live (known, unexpired) token matching secret, whatever
// its scope; the caller decides whether the scope fits.
func (s *Store) Lookup(secret string) (*Token, error) {
	if !strings.HasPrefix(secret, tokenPrefix) {
		return nil, ErrUnauthorized
	}
	h := hashToken(secret)
	now := time.Now().UTC()
	var found *Token
	err := s.file.Read(func(toks []*Token) {
		for _, t := range toks {
			if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(h)) == 1 {
				c := *t
				found = &c
			}
		}
	})
	if err != nil || found == nil || found.Expired(now) {
		return nil, ErrUnauthorized // an unreadable file grants nothing
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used[found.ID] = now
	// The file is at most usedFlushEvery behind for any token: a token whose
	// recorded use is older (or missing) is written now, the rest at most
	// once a period.
	stale := found.LastUsed == nil || now.Sub(*found.LastUsed) >= usedFlushEvery
	if stale || now.Sub(s.flushed) >= usedFlushEvery {
		s.flushUsedLocked(now)
	}
	return found, nil
}

// flushUsedLocked writes pending last-used times back. A failure only costs
// the bookkeeping, never the request.
func (s *Store) flushUsedLocked(now time.Time) {
	s.flushed = now
	used := s.used
	s.used = map[string]time.Time{}
	_ = s.file.Edit(func(toks []*Token) ([]*Token, error) {
		for _, t := range toks {
			if u, ok := used[t.ID]; ok && (t.LastUsed == nil || u.After(*t.LastUsed)) {
				t.LastUsed = &u
			}
		}
		return toks, nil
	})
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
