package proof

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const testOrigin = "toolgate/gw-test"

// testLog is a log of lines and its tree, as a gateway keeps them.
type testLog struct {
	lines  [][]byte
	hashes []tlog.Hash // stored hashes
}

func (l *testLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x >= int64(len(l.hashes)) {
			return nil, fmt.Errorf("no hash %d", x)
		}
		out[i] = l.hashes[x]
	}
	return out, nil
}

// line is a log line in the writer's form, chained to prev.
func line(ts time.Time, id, agent, session, prev string) []byte {
	body := fmt.Sprintf(`{"ts":%q,"id":%q,"phase":"decision","agent":%q,"type":"core_tool","tool":"exec","args":{"command":"echo <hi> \"x\""},"decision":"allow","session":%q,"prev":%q,"hash":"`,
		ts.Format(time.RFC3339Nano), id, agent, session, prev)
	sum := sha256.Sum256([]byte(body + `"}`))
	return []byte(body + hex.EncodeToString(sum[:]) + `"}`)
}

func (l *testLog) add(agent, session string) {
	prev := ""
	if n := len(l.lines); n > 0 {
		h, _ := ClaimedHash(l.lines[n-1])
		prev = hex.EncodeToString(h[:])
	}
	n := len(l.lines)
	ln := line(time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC), fmt.Sprintf("call%03d", n), agent, session, prev)
	h, err := LineHash(ln)
	if err != nil {
		panic(err)
	}
	hs, err := tlog.StoredHashesForRecordHash(int64(n), LeafHash(h), l)
	if err != nil {
		panic(err)
	}
	l.lines = append(l.lines, ln)
	l.hashes = append(l.hashes, hs...)
}

func (l *testLog) checkpoint(t testing.TB, signers ...note.Signer) []byte {
	t.Helper()
	root, err := tlog.TreeHash(int64(len(l.lines)), l)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := SignCheckpoint(Checkpoint{Origin: testOrigin, Size: int64(len(l.lines)), Root: root}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func newKey(t testing.TB, name string) (note.Signer, note.Verifier, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	return s, v, vkey
}

// fixture is a log of two agents' interleaved entries, a receipt of agent
// a's session s, and the keys.
type fixture struct {
	log     *testLog
	key     note.Signer
	v       note.Verifier
	vkey    string
	receipt *Receipt
}

func newFixture(t testing.TB, entries int) *fixture {
	t.Helper()
	f := &fixture{log: &testLog{}}
	f.key, f.v, f.vkey = newKey(t, testOrigin)
	var sel []Line
	for i := range entries {
		if i%3 == 1 {
			f.log.add("b", "s") // another agent naming the same session
			continue
		}
		sel = append(sel, Line{Index: int64(len(f.log.lines))})
		f.log.add("a", "s")
	}
	for i := range sel {
		sel[i].Line = f.log.lines[sel[i].Index]
	}
	var err error
	f.receipt, err = Build(f.log.checkpoint(t, f.key), f.key, f.vkey, Selection{Agent: "a", Session: "s"}, sel, f.log)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := f.receipt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReceiptVerifies(t *testing.T) {
	f := newFixture(t, 30)
	v, err := Verify(f.bytes(t), Options{Keys: []note.Verifier{f.v}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Entries != 20 || v.Checkpoint.Size != 30 || v.Selection.Agent != "a" {
		t.Fatalf("%+v", v)
	}
	// Selective: nothing of agent b's entries but hashes.
	if strings.Contains(string(f.bytes(t)), `\"agent\":\"b\"`) {
		t.Fatal("the receipt holds another agent's entry")
	}
}

// TestReceiptTampering: every way a receipt can be wrong is caught, and
// the reason names the entry.
func TestReceiptTampering(t *testing.T) {
	_, otherV, _ := newKey(t, "toolgate/gw-other")
	for _, tc := range []struct {
		name   string
		edit   func(t *testing.T, f *fixture)
		keys   func(f *fixture) []note.Verifier
		reason string
	}{
		{"a changed byte", func(t *testing.T, f *fixture) {
			f.receipt.Entries[3].Line = strings.Replace(f.receipt.Entries[3].Line, "echo", "ecHo", 1)
		}, nil, "entry 3 (leaf 5, call call005): the line was changed"},
		{"a line rehashed, its proof fails", func(t *testing.T, f *fixture) {
			e := &f.receipt.Entries[3]
			l := []byte(strings.Replace(e.Line, "echo", "ecHo", 1))
			body := l[:len(l)-2-hashHexLen]
			sum := sha256.Sum256(append(append([]byte(nil), body...), `"}`...))
			e.Line = string(body) + hex.EncodeToString(sum[:]) + `"}`
		}, nil, "entry 3 (leaf 5, call call005): its hash is right but its inclusion proof fails"},
		{"an entry dropped", func(t *testing.T, f *fixture) {
			f.receipt.Entries = append(f.receipt.Entries[:5], f.receipt.Entries[6:]...)
		}, nil, "leaf 8: listed by the manifest but not in the receipt"},
		{"an entry added", func(t *testing.T, f *fixture) {
			f.receipt.Manifest = string(mustSign(t, f, f.receipt.Entries[:19]))
		}, nil, "entry 19 (leaf 29): not listed by the manifest"},
		{"another agent's entry", func(t *testing.T, f *fixture) {
			b, err := Build([]byte(f.receipt.Checkpoint), f.key, f.vkey, Selection{Agent: "b", Session: "s"},
				[]Line{{Index: 1, Line: f.log.lines[1]}}, f.log)
			if err != nil {
				t.Fatal(err)
			}
			f.receipt.Entries = append([]Entry{f.receipt.Entries[0], b.Entries[0]}, f.receipt.Entries[1:]...)
			f.receipt.Manifest = string(mustSign(t, f, f.receipt.Entries))
		}, nil, `entry 1 (leaf 1, call call001): not of the selection: it is agent "b"'s entry, not the selection's agent "a"`},
		{"the wrong key", nil, func(*fixture) []note.Verifier { return []note.Verifier{otherV} },
			"checkpoint: signed by toolgate/gw-test+"},
		{"checkpoint and manifest of different trees", func(t *testing.T, f *fixture) {
			f.log.add("a", "s")
			f.receipt.Checkpoint = string(f.log.checkpoint(t, f.key))
		}, nil, "checkpoint and manifest disagree: the manifest is of the tree of 30 entries"},
		{"the selection changed", func(t *testing.T, f *fixture) {
			f.receipt.Selection.Session = "t"
		}, nil, `the receipt's selection {"agent":"a","session":"t"} is not the one the manifest signs`},
		{"the manifest's signature", func(t *testing.T, f *fixture) {
			f.receipt.Manifest = strings.Replace(f.receipt.Manifest, "leaves 0 ", "leaves 2 ", 1)
		}, nil, "manifest: the signature by toolgate/gw-test"},
		{"another format", func(t *testing.T, f *fixture) {
			f.receipt.Format = "x"
		}, nil, `format "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 30)
			if tc.edit != nil {
				tc.edit(t, f)
			}
			keys := []note.Verifier{f.v}
			if tc.keys != nil {
				keys = tc.keys(f)
			}
			_, err := Verify(f.bytes(t), Options{Keys: keys})
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v\nwant …%s…", err, tc.reason)
			}
		})
	}
}

// mustSign re-signs the manifest for entries, as a gateway would.
func mustSign(t *testing.T, f *fixture, entries []Entry) []byte {
	t.Helper()
	cp, _, err := OpenCheckpoint([]byte(f.receipt.Checkpoint), note.VerifierList(f.v))
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Origin: cp.Origin, Tree: tlog.Tree{N: cp.Size, Hash: cp.Root}, Selection: f.receipt.Selection}
	for _, e := range entries {
		m.Leaves = append(m.Leaves, e.Index)
	}
	b, err := m.Sign(f.key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseStrict(t *testing.T) {
	f := newFixture(t, 4)
	good := f.bytes(t)
	for _, tc := range []struct{ name, data, reason string }{
		{"unknown field", strings.Replace(string(good), `"format"`, `"extra":1,"format"`, 1), "unknown field"},
		{"trailing data", string(good) + "{}", "data after the receipt"},
		{"no entries", `{"format":"toolgate-receipt/v1","entries":[]}`, "no entries"},
		{"out of order", strings.Replace(string(good), `"index":3,`, `"index":0,`, 1), "is not after the one before it"},
		{"long proof", strings.Replace(string(good), `"proof":"`, `"proof":"`+strings.Repeat("A", 4000), 1), "proof of more than"},
	} {
		if _, err := Parse([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v, want …%s…", tc.name, err, tc.reason)
		}
	}
}

func TestLeafHashIsRecordHash(t *testing.T) {
	var h [32]byte
	for i := range 50 {
		h[i%32] = byte(i * 7)
		if LeafHash(h) != tlog.RecordHash(h[:]) {
			t.Fatalf("LeafHash(%x) is not tlog's record hash", h)
		}
	}
}

func TestCheckpointText(t *testing.T) {
	c := Checkpoint{Origin: testOrigin, Size: 12}
	c.Root[0] = 1
	got, err := ParseCheckpoint(c.Text())
	if err != nil || got != c {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range []string{
		"toolgate/gw-test\n012\n" + c.Root.String() + "\n",
		"toolgate/gw-test\n-1\n" + c.Root.String() + "\n",
		"toolgate/gw-test\n12\n" + c.Root.String() + "\next\n",
		"toolgate/gw-test\n12\nAAAA\n",
		"toolgate gw\n12\n" + c.Root.String() + "\n",
		"toolgate/gw-test\n12\n" + c.Root.String(),
	} {
		if _, err := ParseCheckpoint(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	// Signed by a key of another name than the origin: refused.
	s, v, _ := newKey(t, "toolgate/gw-other")
	msg, _ := SignCheckpoint(c, s)
	if _, _, err := OpenCheckpoint(msg, note.VerifierList(v)); err == nil || !strings.Contains(err.Error(), "origin") {
		t.Fatalf("origin not the key's name: %v", err)
	}
}

func TestManifestText(t *testing.T) {
	m := &Manifest{Origin: testOrigin, Tree: tlog.Tree{N: 9}, Selection: Selection{Agent: "a", Session: "s\nx"}, Leaves: []int64{1, 4, 8}}
	text, err := m.Text()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseManifest(text)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(got); string(b) != mustJSON(m) {
		t.Fatalf("round trip: %s, want %s", b, mustJSON(m))
	}
	for _, bad := range []string{
		strings.Replace(text, "leaves 1 4 8", "leaves 4 1 8", 1),
		strings.Replace(text, "leaves 1 4 8", "leaves 1 4 9", 1),
		strings.Replace(text, `{"agent"`, `{"x":1,"agent"`, 1),
		strings.Replace(text, "manifest v1", "manifest v2", 1),
		strings.Replace(text, "leaves 1 4 8", "leaves", 1),
	} {
		if _, err := ParseManifest(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func FuzzParseReceipt(f *testing.F) {
	fx := newFixture(f, 5)
	f.Add(fx.bytes(f))
	f.Add([]byte(`{"format":"toolgate-receipt/v1","entries":[{"index":0,"line":"{}","proof":""}]}`))
	keys := []note.Verifier{fx.v}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		again, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(again); err != nil {
			t.Fatalf("a parsed receipt does not parse again: %v", err)
		}
		_, _ = Verify(data, Options{Keys: keys}) // must not panic
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	s, v, _ := newKey(f, testOrigin)
	msg, _ := SignCheckpoint(Checkpoint{Origin: testOrigin, Size: 3}, s)
	f.Add(string(msg))
	f.Add("toolgate/gw-test\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
	f.Fuzz(func(t *testing.T, text string) {
		if c, err := ParseCheckpoint(text); err == nil && c.Text() != text {
			t.Fatalf("%q parsed but is not its own text %q", text, c.Text())
		}
		if c, n, err := OpenCheckpoint([]byte(text), note.VerifierList(v)); err == nil && (c.Text() != n.Text || c.Origin != testOrigin) {
			t.Fatalf("opened %q as %+v", text, c)
		}
		if m, err := ParseManifest(text); err == nil {
			if again, _ := m.Text(); again != text {
				t.Fatalf("manifest %q is not its own text", text)
			}
		}
	})
}
