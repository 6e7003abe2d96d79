package witness

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/identity"
	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/note"
)

// gatewayLog is a gateway's audit log with its key: n entries written,
// then a checkpoint asked for.
type gatewayLog struct {
	dir  string
	keys *identity.Keys
	w    *audit.Writer
}

func newLog(t *testing.T, home string) *gatewayLog {
	t.Helper()
	keys, _, err := identity.Ensure(home)
	if err != nil {
		t.Fatal(err)
	}
	l := &gatewayLog{dir: filepath.Join(home, "logs"), keys: keys}
	l.reopen(t)
	return l
}

func (l *gatewayLog) reopen(t *testing.T) {
	t.Helper()
	w, err := audit.Open(l.dir, audit.Options{Key: l.keys.Current.Signer})
	if err != nil {
		t.Fatal(err)
	}
	l.w = w
	t.Cleanup(func() { w.Close() })
}

func (l *gatewayLog) write(t *testing.T, n int, word string) []byte {
	t.Helper()
	for i := range n {
		if err := l.w.Append(&gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: gateway.PhaseDecision, Agent: "a",
			Type: gateway.KindCore, Tool: "exec", Decision: "allow", Rule: "r", Reason: fmt.Sprint(word, i)}); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := l.w.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func (l *gatewayLog) submit(t *testing.T, c *Client, cp []byte) ([]byte, error) {
	t.Helper()
	hashes, done, err := audit.TreeHashes(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	return c.Submit(context.Background(), cp, hashes)
}

// The witness cosigns a log's checkpoints while each is consistent with
// the last; the cosignature verifies with its key; it refuses a rewritten
// history signed with the same key, a log restored from an old copy, and
// a log it does not know — across a restart, keeping the refused request.
func TestWitness(t *testing.T) {
	home := t.TempDir()
	gw := newLog(t, home)
	wdir := t.TempDir()
	w, err := Open(wdir, "witness.test/w1", []note.Verifier{mustVerifier(t, gw.keys.Current.Verifier)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()
	c := &Client{URL: srv.URL}

	cp1 := gw.write(t, 10, "first")
	sigs, err := gw.submit(t, c, cp1)
	if err != nil {
		t.Fatal(err)
	}
	wv, err := note.NewVerifier(w.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	cosigned := Cosign(cp1, sigs)
	if _, n, err := proof.OpenCheckpoint(cosigned, note.VerifierList(mustVerifier(t, gw.keys.Current.Verifier), wv)); err != nil || len(n.Sigs) != 2 {
		t.Fatalf("cosigned checkpoint: %v %+v", err, n)
	}
	cp2 := gw.write(t, 25, "second")
	if _, err := gw.submit(t, c, cp2); err != nil {
		t.Fatalf("a consistent checkpoint: %v", err)
	}

	// A witness started again remembers; a client that does not learns.
	srv.Close()
	if w, err = Open(wdir, "", []note.Verifier{mustVerifier(t, gw.keys.Current.Verifier)}, nil); err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(w.Handler())
	defer srv.Close()

	// The same gateway's history rewritten: a log of the same length and
	// key, other entries, re-chained and re-signed.
	gw.w.Close()
	if err := os.RemoveAll(gw.dir); err != nil {
		t.Fatal(err)
	}
	gw.reopen(t)
	forged := gw.write(t, 40, "forged")
	_, err = gw.submit(t, &Client{URL: srv.URL}, forged)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "422") {
		t.Fatalf("a rewritten history: %v", err)
	}
	if ev, _ := os.ReadDir(filepath.Join(wdir, EvidenceDir)); len(ev) != 1 {
		t.Fatalf("evidence kept: %d files", len(ev))
	}

	// A log restored from an old copy: fewer entries than cosigned.
	old := newLog(t, t.TempDir())
	old.keys = gw.keys
	old.w.Close()
	old.reopen(t)
	small := old.write(t, 3, "old")
	if _, err := old.submit(t, &Client{URL: srv.URL}, small); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "old copy") {
		t.Fatalf("a log restored from an old copy: %v", err)
	}

	// Another gateway's log: unknown here.
	other := newLog(t, t.TempDir())
	if _, err := other.submit(t, &Client{URL: srv.URL}, other.write(t, 2, "x")); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("an unknown log: %v", err)
	}
}

func mustVerifier(t *testing.T, k string) note.Verifier {
	v, err := note.NewVerifier(k)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Malformed requests are refused with 400, nothing cosigned.
func TestWitnessRefusesMalformed(t *testing.T) {
	w, err := Open(t.TempDir(), "witness.test/w2", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"", "old\n\n", "old 01\n\n", "old -1\n\n", "old 1\nnot base64\n\n", "old 0\n", "new 0\n\n"} {
		if status, _, _ := w.Add([]byte(body)); status != 400 {
			t.Errorf("%q: %d", body, status)
		}
	}
}

func FuzzAdd(f *testing.F) {
	f.Add([]byte("old 0\n\ntoolgate/x\n1\nAAAA\n\n— toolgate/x abc\n"))
	f.Add([]byte("old 5\nPlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n\nx\n"))
	w, err := Open(f.TempDir(), "witness.test/fuzz", nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if status, _, _ := w.Add(body); status == 200 {
			t.Fatalf("cosigned %q for a witness that knows no log", body)
		}
	})
}
