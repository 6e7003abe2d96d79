// Package identity is who a gateway is to the world: its id (HOME/gateway.id,
// the name of its chain in the fleet database) and its signing key
// (HOME/gateway.key), an ed25519 key in the signed-note format of
// golang.org/x/mod/sumdb/note, named toolgate/<id>: the log's origin. The
// key signs the audit log's checkpoints and receipts' manifests; its
// verifier key is what anyone checks them with (toolgate id prints it).
package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/toolgate/toolgate/internal/lib/durable"
)

// KeyFile holds the gateway's signer key (0600); a rotation keeps the old
// one beside it as KeyFile.<UTC time>.
const KeyFile = "gateway.key"

// rotatedLayout names an old key by when it was rotated out; it sorts.
const rotatedLayout = "20060102T150405Z"

// Origin is the name of the log of the gateway with this id, and of its key.
func Origin(id string) string { return "toolgate/" + id }

// Key is a signer key and its verifier key.
type Key struct {
	note.Signer
	Verifier string // name+hash+key, as verifiers are given it
	File     string // where it is kept
}

// Keys are a gateway's current key and those it had before, newest first.
type Keys struct {
	Origin  string
	Current *Key
	Old     []*Key
}

// Verifiers are every key's verifier: what checks the gateway's whole log,
// checkpoints signed before a rotation included.
func (k *Keys) Verifiers() (note.Verifiers, error) {
	var vs []note.Verifier
	for _, key := range append([]*Key{k.Current}, k.Old...) {
		v, err := note.NewVerifier(key.Verifier)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", key.File, err)
		}
		vs = append(vs, v)
	}
	return note.VerifierList(vs...), nil
}

// OldSigners are the old keys as signers.
func (k *Keys) OldSigners() []note.Signer {
	var out []note.Signer
	for _, o := range k.Old {
		out = append(out, o.Signer)
	}
	return out
}

// Load reads the keys of home; fs.ErrNotExist when it has none yet.
func Load(home string) (*Keys, error) {
	id, err := GatewayID(home)
	if err != nil {
		return nil, err
	}
	k := &Keys{Origin: Origin(id)}
	if k.Current, err = readKey(filepath.Join(home, KeyFile), k.Origin); err != nil {
		return nil, err
	}
	old, err := filepath.Glob(filepath.Join(home, KeyFile+".*"))
	if err != nil {
		return nil, err
	}
	slices.Sort(old)
	slices.Reverse(old)
	for _, path := range old {
		if _, err := time.Parse(rotatedLayout, strings.TrimPrefix(filepath.Base(path), KeyFile+".")); err != nil {
			continue // not a rotated key (an editor's backup, a temporary file)
		}
		key, err := readKey(path, k.Origin)
		if err != nil {
			return nil, err
		}
		k.Old = append(k.Old, key)
	}
	return k, nil
}

// Ensure loads the keys of home, creating the signer key the first time;
// created says it did.
func Ensure(home string) (k *Keys, created bool, err error) {
	k, err = Load(home)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	id, err := GatewayID(home)
	if err != nil {
		return nil, false, err
	}
	if err := newKey(filepath.Join(home, KeyFile), Origin(id)); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, false, err
	}
	k, err = Load(home)
	return k, err == nil, err
}

// Rotate keeps the current key as KeyFile.<now> and makes a new one. A
// running gateway must be told (its admin API rotates for it): it signs
// its next checkpoint with both keys, so whoever holds only the old key
// can follow the hand-over; a gateway not running does so when it starts.
func Rotate(home string, now time.Time) (*Keys, error) {
	k, err := Load(home)
	if err != nil {
		return nil, err
	}
	old := filepath.Join(home, KeyFile+"."+now.UTC().Format(rotatedLayout))
	if _, err := os.Lstat(old); err == nil {
		return nil, fmt.Errorf("%s exists: one rotation a second", old)
	}
	if err := os.Rename(k.Current.File, old); err != nil {
		return nil, fmt.Errorf("rotating the gateway key: %w", err)
	}
	if err := newKey(k.Current.File, k.Origin); err != nil {
		return nil, fmt.Errorf("rotating the gateway key: the old key is kept as %s, and a new one could not be made: %w", old, err)
	}
	return Load(home)
}

// newKey writes a new signer key named name to path, which must not exist.
func newKey(path, name string) error {
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("gateway key: %w", err)
	}
	_, werr := f.WriteString(skey + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("gateway key: %w", err)
	}
	return durable.SyncDir(filepath.Dir(path))
}

// readKey reads a signer key file and derives its verifier key; the key
// must be named name, this gateway's origin.
func readKey(path, name string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gateway key: %w", err)
	}
	skey := strings.TrimSpace(string(b))
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("gateway key %s: %v", path, err)
	}
	if s.Name() != name {
		return nil, fmt.Errorf("gateway key %s is named %s, but this gateway's log is %s (was %s edited?)", path, s.Name(), name, IDFile)
	}
	// PRIVATE+KEY+name+hash+base64(algorithm byte ‖ ed25519 seed); the
	// base64 may hold a + itself.
	fields := strings.SplitN(skey, "+", 5)
	raw, err := base64.StdEncoding.DecodeString(fields[len(fields)-1])
	if err != nil || len(raw) != 1+ed25519.SeedSize {
		return nil, fmt.Errorf("gateway key %s: not an ed25519 key", path)
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		return nil, err
	}
	return &Key{Signer: s, Verifier: vkey, File: path}, nil
}
