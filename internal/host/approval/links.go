package approval

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A link answers one waiting call one way. Its token is
//
//	v1.BASE64URL(claims).BASE64URL(HMAC-SHA256(key, "toolgate-approval-link/v1\n" + claims))
//
// with a key the gateway draws at start and never writes down: a link
// outlives neither the gateway nor the call (a waiting call does not
// survive a restart either). The claims bind the call's id, its digest
// (every byte it will use, Digest), the policy version that asked, the
// answer and the notifier it was sent to, and expire with the ask. It is
// single-use by construction: the first answer ends the wait, and every
// later link of the call finds nothing waiting.
const (
	linkVersion = "v1"
	linkContext = "toolgate-approval-link/v1\n"
	// MaxLink bounds a token read from a request before anything is decoded.
	MaxLink = 2048
)

// Claims are what a link's token binds.
type Claims struct {
	Call     string `json:"c"`
	Digest   string `json:"d"`
	Policy   string `json:"p"`
	Approve  bool   `json:"a"`
	Notifier string `json:"n"`
	Expires  int64  `json:"e"` // Unix seconds
}

// Links signs and verifies answer links.
type Links struct {
	key [32]byte
	now func() time.Time
}

// NewLinks draws a fresh key.
func NewLinks() *Links {
	l := &Links{now: time.Now}
	if _, err := rand.Read(l.key[:]); err != nil {
		panic("approval: no randomness for the link key: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return l
}

func (l *Links) mac(claims []byte) []byte {
	m := hmac.New(sha256.New, l.key[:])
	m.Write([]byte(linkContext))
	m.Write(claims)
	return m.Sum(nil)
}

// Sign returns the token of c.
func (l *Links) Sign(c Claims) string {
	b, _ := json.Marshal(c) // fields of fixed types
	enc := base64.RawURLEncoding
	return linkVersion + "." + enc.EncodeToString(b) + "." + enc.EncodeToString(l.mac(b))
}

// The reasons a link is refused.
var (
	ErrLinkMalformed = errors.New("the link is not an approval link")
	ErrLinkForged    = errors.New("the link's signature does not match: it was not made by this gateway (or since its restart)")
	ErrLinkExpired   = errors.New("the link has expired")
)

// Verify returns the claims of a token this gateway signed that has not
// expired. Nothing of the claims is read before the signature checks.
func (l *Links) Verify(token string) (Claims, error) {
	var c Claims
	if len(token) > MaxLink {
		return c, ErrLinkMalformed
	}
	ver, rest, ok := strings.Cut(token, ".")
	if !ok || ver != linkVersion {
		return c, ErrLinkMalformed
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return c, ErrLinkMalformed
	}
	enc := base64.RawURLEncoding
	claims, err1 := enc.DecodeString(payload)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return c, ErrLinkMalformed
	}
	if !hmac.Equal(mac, l.mac(claims)) {
		return c, ErrLinkForged
	}
	if err := json.Unmarshal(claims, &c); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrLinkMalformed, err)
	}
	if !l.now().Before(time.Unix(c.Expires, 0)) {
		return Claims{}, ErrLinkExpired
	}
	return c, nil
}
