// Package proof is what a gateway's audit log proves to someone who does
// not trust the gateway's host: the formats of its signed checkpoints, of a
// receipt's signed manifest and of the receipt itself, and the verifier of
// receipts. It imports only the standard library and the Go team's
// transparency-log packages (golang.org/x/mod/sumdb/note for signed notes,
// .../tlog for RFC 6962 hashing and proofs), so a customer builds the
// standalone verifier (cmd/toolgate-verify) from this one package.
//
// The log is a Merkle tree: leaf i is the log's line i (from 0, in chain
// order, across rotated files), its leaf data the 32 bytes of the line's
// own chain hash (LeafHash). A checkpoint is a signed tree head in the C2SP
// tlog-checkpoint format; docs/protocol.md describes every format here.
package proof

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a tree head: the tree of the log's first Size leaves has
// root Root. Origin names the log (toolgate/<gateway id>), and is also the
// name of the key that signs it.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// MaxNote bounds a signed note this package reads (a checkpoint with its
// signatures and cosignatures is a few hundred bytes).
const MaxNote = 64 << 10

// Text is the checkpoint's note text (C2SP tlog-checkpoint, no extension
// lines): origin, size in decimal, root in base64, each on its own line.
func (c Checkpoint) Text() string {
	return fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// ParseCheckpoint reads a checkpoint's note text, strictly: exactly the
// three lines Text writes, a size without sign or leading zeros, a root in
// canonical base64.
func ParseCheckpoint(text string) (Checkpoint, error) {
	var c Checkpoint
	if len(text) > MaxNote || !strings.HasSuffix(text, "\n") {
		return c, errors.New("checkpoint: not a note text (too long, or no final newline)")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 3 {
		return c, fmt.Errorf("checkpoint: %d lines, want 3 (origin, size, root)", len(lines))
	}
	if !validOrigin(lines[0]) {
		return c, fmt.Errorf("checkpoint: origin %q is not a log name", clip(lines[0]))
	}
	size, err := parseSize(lines[1])
	if err != nil {
		return c, fmt.Errorf("checkpoint: size: %v", err)
	}
	root, err := parseHash(lines[2])
	if err != nil {
		return c, fmt.Errorf("checkpoint: root: %v", err)
	}
	return Checkpoint{Origin: lines[0], Size: size, Root: root}, nil
}

// SignCheckpoint returns c as a signed note, signed by each of signers.
func SignCheckpoint(c Checkpoint, signers ...note.Signer) ([]byte, error) {
	return note.Sign(&note.Note{Text: c.Text()}, signers...)
}

// OpenCheckpoint checks a signed checkpoint: at least one signature by one
// of keys, no signature by one of them that fails, a text that parses, and
// an origin that is the name of a key that signed it. The note carries
// every signature, verified (Sigs) or by keys not given (UnverifiedSigs).
func OpenCheckpoint(msg []byte, keys note.Verifiers) (Checkpoint, *note.Note, error) {
	n, err := openNote(msg, keys)
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if !signedAs(n, c.Origin) {
		return Checkpoint{}, nil, fmt.Errorf("checkpoint: origin %s is not the name of a key that signed it (%s)", c.Origin, signers(n))
	}
	return c, n, nil
}

// openNote opens a signed note, saying who signed it when no given key did.
func openNote(msg []byte, keys note.Verifiers) (*note.Note, error) {
	if len(msg) > MaxNote {
		return nil, fmt.Errorf("note of %d bytes is over the limit of %d", len(msg), MaxNote)
	}
	n, err := note.Open(msg, keys)
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return nil, &WrongKeyError{SignedBy: signers(unverified.Note)}
	case errors.As(err, &invalid):
		return nil, fmt.Errorf("the signature by %s+%08x does not verify: the signed text was changed", invalid.Name, invalid.Hash)
	case err != nil:
		return nil, fmt.Errorf("not a signed note: %v", err)
	}
	return n, nil
}

// WrongKeyError is a note none of the given keys signed.
type WrongKeyError struct {
	SignedBy string // the signatures it has: name+keyhash, …
}

func (e *WrongKeyError) Error() string {
	return "not signed by the given key; it is signed by " + e.SignedBy
}

// signers lists a note's signatures as name+keyhash.
func signers(n *note.Note) string {
	var names []string
	for _, s := range append(append([]note.Signature(nil), n.Sigs...), n.UnverifiedSigs...) {
		names = append(names, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
	}
	if len(names) == 0 {
		return "nobody"
	}
	return strings.Join(names, ", ")
}

// signedAs reports whether a verified signature of n is by a key named name.
func signedAs(n *note.Note, name string) bool {
	for _, s := range n.Sigs {
		if s.Name == name {
			return true
		}
	}
	return false
}

// validOrigin: a note key name (no space, no +), and printable.
func validOrigin(s string) bool {
	if s == "" || len(s) > 256 || strings.ContainsAny(s, "+ \t") {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f {
			return false
		}
	}
	return true
}

// parseSize reads a tree size: decimal digits, no leading zero, fits an int64.
func parseSize(s string) (int64, error) {
	if s == "" || len(s) > 1 && s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a decimal size", clip(s))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %v", clip(s), err)
	}
	return n, nil
}

// parseHash reads a hash in canonical standard base64.
func parseHash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != tlog.HashSize {
		return h, fmt.Errorf("%q is not a base64 SHA-256 hash", clip(s))
	}
	copy(h[:], b)
	return h, nil
}

// clip shortens a value quoted back in an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// NoteKeys reads verifier keys (name+hash+key, as `toolgate id` prints
// them), one a line; blank lines and lines starting with # are skipped.
func NoteKeys(text []byte) ([]note.Verifier, error) {
	var out []note.Verifier
	for line := range bytes.Lines(text) {
		s := strings.TrimSpace(string(line))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		v, err := note.NewVerifier(s)
		if err != nil {
			return nil, fmt.Errorf("verifier key %q: %v", clip(s), err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no verifier key")
	}
	return out, nil
}
