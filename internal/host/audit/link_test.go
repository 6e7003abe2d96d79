package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// TestEntryFieldsMatchEntry: fastLink's table is gateway.Entry's fields, in
// order, each checked as its Go type decodes. A field added, moved or
// retyped in Entry must be reflected there.
func TestEntryFieldsMatchEntry(t *testing.T) {
	kinds := map[reflect.Type]fieldKind{
		reflect.TypeFor[time.Time]():       fTime,
		reflect.TypeFor[json.RawMessage](): fRaw,
		reflect.TypeFor[*float64]():        fFloat,
		reflect.TypeFor[*int]():            fInt,
		reflect.TypeFor[map[string]any]():  fAnyMap,
		reflect.TypeFor[string]():          fString,
		reflect.TypeFor[gateway.Kind]():    fString,
	}
	et := reflect.TypeFor[gateway.Entry]()
	if et.NumField() != len(entryFields) {
		t.Fatalf("gateway.Entry has %d fields, entryFields %d", et.NumField(), len(entryFields))
	}
	for i := range et.NumField() {
		f := et.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		want, ok := kinds[f.Type]
		switch name {
		case "prev":
			want = fPrev
		case "hash":
			want = fHash
		case "type":
			want = fType
		}
		if !ok || string(entryFields[i].key) != `"`+name+`":` || entryFields[i].kind != want {
			t.Errorf("field %d: Entry has %s %v, entryFields %s kind %d", i, name, f.Type, entryFields[i].key, entryFields[i].kind)
		}
	}
}

// rehash sets the hash a line claims to the hash of its bytes, so a line
// changed on purpose differs from the original in its content only.
func rehash(line []byte) []byte {
	if claimedHash(line) == nil {
		return line
	}
	out := bytes.Clone(line)
	body := append(bytes.Clone(out[:len(out)-2-hashHexLen]), `"}`...)
	sum := sha256.Sum256(body)
	hex.Encode(out[len(out)-2-hashHexLen:], sum[:])
	return out
}

// sameAsDecode fails unless link judges line exactly as parseLine, which
// decodes it whole: the same error, or the same prev, hash and type.
func sameAsDecode(t testing.TB, line []byte) {
	t.Helper()
	prev, hash, typ, err := newLinkChecker().link(line)
	e, derr := parseLine(line)
	switch {
	case (err == nil) != (derr == nil) || err != nil && err.Error() != derr.Error():
		t.Fatalf("link and decode disagree on %q:\nlink:   %v\ndecode: %v", line, err, derr)
	case err == nil && (string(prev) != e.Prev || string(hash) != e.Hash || typ != e.Type):
		t.Fatalf("link and decode disagree on %q: prev %q hash %q type %q, decoded %q %q %q", line, prev, hash, typ, e.Prev, e.Hash, e.Type)
	}
}

func canonicalLines(tb testing.TB) [][]byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	var out [][]byte
	prev := ""
	for i := range 4 {
		for _, e := range []*gateway.Entry{entry(i), synthEntry(i)} {
			buf.Reset()
			if err := encodeLine(&buf, enc, e, prev); err != nil {
				tb.Fatal(err)
			}
			prev = e.Hash
			out = append(out, bytes.Clone(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})))
		}
	}
	return out
}

// TestFastLinkTakesWritersLines: the writer's own lines take the fast path
// (verify's speed depends on it), and the path agrees with decoding.
func TestFastLinkTakesWritersLines(t *testing.T) {
	for _, line := range canonicalLines(t) {
		prev, _, ok := fastLink(line, claimedHash(line))
		e, err := parseLine(line)
		if !ok || err != nil || string(prev) != e.Prev {
			t.Fatalf("fastLink(%s) = %q, %v; decode: %v", line, prev, ok, err)
		}
	}
}

// TestLinkAgreesWithDecode: lines the fast path must give up on, or judge
// exactly as encoding/json does. Each is rehashed, so only its content
// differs from a good line.
func TestLinkAgreesWithDecode(t *testing.T) {
	good := string(canonicalLines(t)[1]) // a decision with args
	res := string(canonicalLines(t)[3])  // a result with durationMs, exitCode, detail
	for _, tc := range []struct {
		name     string
		line     string
		fast, ok bool // taken by fastLink; accepted by both
	}{
		{"the writer's", good, true, true},
		{"a key repeated", strings.Replace(good, `"agent":"demo"`, `"agent":"demo","agent":"x"`, 1), false, true},
		{"prev repeated", strings.Replace(good, `"prev":`, `"prev":"x","prev":`, 1), false, true},
		{"a key in capitals", strings.Replace(good, `"prev":`, `"PREV":`, 1), false, true},
		{"a key escaped", strings.Replace(good, `"prev":`, `"pr\u0065v":`, 1), false, true},
		{"an unknown key", strings.Replace(good, `"agent":`, `"x":1,"agent":`, 1), false, true},
		{"keys out of order", strings.Replace(good, `"id":`, `"zz":0,"id":`, 1), false, true},
		{"prev escaped", strings.Replace(good, `"prev":"`, `"prev":"\u0030`, 1), false, true},
		{"prev not ASCII", strings.Replace(good, `"prev":"`, "\"prev\":\"\xff", 1), false, true},
		{"prev missing", strings.Replace(good, `"prev":"`, `"prex":"`, 1), false, true},
		{"prev null", strings.Replace(good, `"prev":"`, `"prev":null,"x":"`, 1), false, true},
		{"a space", strings.Replace(good, `"agent":`, `"agent": `, 1), false, true},
		{"a string null", strings.Replace(good, `"agent":"demo"`, `"agent":null`, 1), false, true},
		{"a string a number", strings.Replace(good, `"agent":"demo"`, `"agent":1`, 1), false, false},
		{"a control byte", strings.Replace(good, `demo`, "de\x01mo", 1), false, false},
		{"a bad escape", strings.Replace(good, `demo`, `de\qmo`, 1), false, false},
		{"a short \\u", strings.Replace(good, `demo`, `de\u12`, 1), false, false},
		{"escapes", strings.Replace(good, `demo`, `d\"\\\/\b\f\n\r\t\u00e9mo`, 1), true, true},
		{"invalid UTF-8", strings.Replace(good, `demo`, "d\xffmo", 1), true, true},
		{"ts not a time", strings.Replace(good, `"ts":"2026-01-01T00:00:00Z"`, `"ts":"yesterday"`, 1), false, false},
		{"ts a number", strings.Replace(good, `"ts":"2026-01-01T00:00:00Z"`, `"ts":1`, 1), false, false},
		{"ts escaped", strings.Replace(good, `"ts":"2026-`, `"ts":"2026\u002d`, 1), false, false},
		{"ts day 32", strings.Replace(good, `"ts":"2026-01-01T`, `"ts":"2026-01-32T`, 1), false, false},
		{"args deep", strings.Replace(good, `"args":{`, `"args":`+strings.Repeat("[", 200)+strings.Repeat("]", 200)+`,"argz":{`, 1), false, true},
		{"args huge number", strings.Replace(good, `"timeout":30`, `"timeout":1e999`, 1), true, true},
		{"args bad number", strings.Replace(good, `"timeout":30`, `"timeout":01`, 1), false, false},
		{"args trailing comma", strings.Replace(good, `"timeout":30`, `"timeout":30,`, 1), false, false},
		{"args literals", strings.Replace(good, `"timeout":30`, `"t":[true,false,null,-0.5e+3,{}]`, 1), true, true},
		{"args bad literal", strings.Replace(good, `"timeout":30`, `"t":nul`, 1), false, false},
		{"durationMs too big", strings.Replace(res, `"durationMs":13.5`, `"durationMs":1e999`, 1), false, false},
		{"durationMs a string", strings.Replace(res, `"durationMs":13.5`, `"durationMs":"1"`, 1), false, false},
		{"durationMs null", strings.Replace(res, `"durationMs":13.5`, `"durationMs":null`, 1), false, true},
		{"exitCode a fraction", strings.Replace(res, `"exitCode":1`, `"exitCode":1.5`, 1), false, false},
		{"exitCode exponent", strings.Replace(res, `"exitCode":1`, `"exitCode":1e2`, 1), false, false},
		{"exitCode too big", strings.Replace(res, `"exitCode":1`, `"exitCode":99999999999999999999`, 1), false, false},
		{"exitCode negative", strings.Replace(res, `"exitCode":1`, `"exitCode":-1`, 1), true, true},
		{"detail huge number", strings.Replace(res, `"stdoutBytes":1`, `"stdoutBytes":[1e999]`, 1), false, false},
		{"detail an array", strings.Replace(res, `"detail":{`, `"detail":[],"x":{`, 1), false, false},
		{"detail null", strings.Replace(res, `"detail":{`, `"detail":null,"x":{`, 1), false, true},
		{"bytes after", good[:len(good)-2] + `"}` + ` `, false, false},
		{"hash repeated", strings.Replace(good, `"prev":`, `"hash":"x","prev":`, 1), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.line == good && tc.name != "the writer's" {
				t.Fatal("the change did not apply")
			}
			line := rehash([]byte(tc.line))
			sameAsDecode(t, line)
			if _, _, ok := fastLink(line, claimedHash(line)); ok != tc.fast {
				t.Errorf("fastLink took it: %v, want %v", ok, tc.fast)
			}
			if _, err := parseLine(line); (err == nil) != tc.ok {
				t.Errorf("decode: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestLinkAgreesOnEveryByteChange: every one-byte change of the writer's
// lines, rehashed, is judged by link as decoding judges it.
func TestLinkAgreesOnEveryByteChange(t *testing.T) {
	subst := []byte("\"\\,:{}[]09e-+. \x00\x1f\x7f\x80\xffAntfu/")
	for _, line := range canonicalLines(t)[:4] {
		body := len(line) - 2 - hashHexLen
		for i := range body {
			for _, c := range subst {
				changed := bytes.Clone(line)
				changed[i] = c
				sameAsDecode(t, rehash(changed))
			}
			sameAsDecode(t, rehash(append(bytes.Clone(line[:i]), line[i+1:]...)))              // deleted
			sameAsDecode(t, rehash(append(bytes.Clone(line[:i+1]), line[i:]...)))              // doubled
			sameAsDecode(t, append(bytes.Clone(line[:i]), line[i+1:]...))                      // deleted, not rehashed
			sameAsDecode(t, []byte(fmt.Sprintf("%s%c%s", line[:i], line[i]^0x01, line[i+1:]))) // flipped bit
		}
	}
}

// FuzzFastLink: a line fastLink takes is one encoding/json decodes into an
// Entry with the same prev and hash; and link, fast or not, judges every
// line as decoding does.
func FuzzFastLink(f *testing.F) {
	for _, line := range canonicalLines(f) {
		f.Add(line)
	}
	f.Add([]byte(`{"prev":"","hash":"` + strings.Repeat("a", 64) + `"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, l := range [][]byte{line, rehash(line)} {
			if prev, typ, ok := fastLink(l, claimedHash(l)); ok {
				e, err := decodeLine(l, claimedHash(l))
				if err != nil || e.Prev != string(prev) || string(e.Type) != string(typ) {
					t.Fatalf("fastLink took %q (prev %q, type %q); decode: %v", l, prev, typ, err)
				}
			}
			sameAsDecode(t, l)
		}
	})
}
