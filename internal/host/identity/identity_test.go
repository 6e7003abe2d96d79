package identity

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

func TestGatewayID(t *testing.T) {
	home := t.TempDir()
	id, err := GatewayID(home)
	if err != nil || !strings.HasPrefix(id, "gw-") {
		t.Fatalf("%q %v", id, err)
	}
	if again, err := GatewayID(home); err != nil || again != id {
		t.Fatalf("not kept: %q then %q, %v", id, again, err)
	}
	if err := os.WriteFile(filepath.Join(home, IDFile), []byte("edge-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, err := GatewayID(home); err != nil || id != "edge-1" {
		t.Fatalf("operator's name: %q %v", id, err)
	}
	if err := os.WriteFile(filepath.Join(home, IDFile), []byte("bad id; drop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := GatewayID(home); err == nil {
		t.Fatal("a malformed id was accepted")
	}
}

func TestKeyCreatedKeptAndRotated(t *testing.T) {
	home := t.TempDir()
	if _, err := Load(home); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a home without a key: %v, want ErrNotExist", err)
	}
	k, created, err := Ensure(home)
	if err != nil || !created {
		t.Fatalf("Ensure: %v created=%v", err, created)
	}
	fi, err := os.Stat(filepath.Join(home, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	id, _ := GatewayID(home)
	if k.Origin != "toolgate/"+id || k.Current.Name() != k.Origin || !strings.HasPrefix(k.Current.Verifier, k.Origin+"+") {
		t.Fatalf("names: %s %s %s", k.Origin, k.Current.Name(), k.Current.Verifier)
	}
	again, created, err := Ensure(home)
	if err != nil || created || again.Current.Verifier != k.Current.Verifier {
		t.Fatalf("not kept: %v created=%v", err, created)
	}
	// The verifier key derived from the signer key checks its signatures.
	msg, err := note.Sign(&note.Note{Text: "hello\n"}, k.Current)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := k.Verifiers()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(msg, vs); err != nil {
		t.Fatalf("own signature: %v", err)
	}

	rotated, err := Rotate(home, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Current.Verifier == k.Current.Verifier || len(rotated.Old) != 1 || rotated.Old[0].Verifier != k.Current.Verifier ||
		filepath.Base(rotated.Old[0].File) != "gateway.key.20260301T120000Z" {
		t.Fatalf("after rotation: current %s, old %+v", rotated.Current.Verifier, rotated.Old)
	}
	vs, _ = rotated.Verifiers()
	if _, err := note.Open(msg, vs); err != nil {
		t.Fatalf("a note signed before the rotation no longer verifies: %v", err)
	}
	if _, err := Rotate(home, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)); err == nil {
		t.Fatal("a second rotation in the same second overwrote the old key")
	}

	// A key named for another gateway is refused.
	if err := os.WriteFile(filepath.Join(home, IDFile), []byte("edge-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(home); err == nil || !strings.Contains(err.Error(), "named toolgate/"+id) {
		t.Fatalf("a key of another name: %v", err)
	}
}
