package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	b := NewBounder(20)
	b.AddSecrets("hunter2-token", "abc", "s3cr3t", "s3cr3t-longer")
	deep := strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40)
	many := "[" + strings.TrimSuffix(strings.Repeat("1,", 300), ",") + "]"
	var keys []string
	for i := range 300 {
		keys = append(keys, fmt.Sprintf(`"k%d":%d`, i, i))
	}
	for _, tc := range []struct{ name, in, want string }{
		{"short kept", `{"a":"short","n":1.50,"t":true,"z":null}`, `{"a":"short","n":1.50,"t":true,"z":null}`},
		{"long cut", `{"a":"` + strings.Repeat("x", 100) + `"}`, `{"a":"` + strings.Repeat("x", 20) + `…[cut 80 bytes]"}`},
		{"cut on a rune boundary", `"` + strings.Repeat("é", 15) + `"`, `"` + strings.Repeat("é", 10) + `…[cut 10 bytes]"`},
		{"secret in value", `{"cmd":"x: hunter2-token"}`, `{"cmd":"x: [REDACTED]"}`},
		{"longest secret first", `"s3cr3t-longer"`, `"[REDACTED]"`},
		{"secret in key", `{"s3cr3t":1}`, `{"[REDACTED]":1}`},
		{"secret as number", `{"pin":123456789}`, `{"pin":123456789}`},
		{"short secret ignored", `"abcdef"`, `"abcdef"`},
		{"invalid utf8", "\"a\xffb\"", `"a` + "\uFFFD" + `b"`},
		{"html kept readable", `"<a&b>"`, `"<a&b>"`},
		{"not json", `{"a":`, `{"invalidJSONBytes":5}`},
		{"trailing data", `{} {}`, `{"invalidJSONBytes":5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(b.Bound(json.RawMessage(tc.in))); got != tc.want {
				t.Fatalf("Bound(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
	if got := string(b.Bound(json.RawMessage(deep))); !strings.Contains(got, "…[depth limit, cut 48 bytes]") || !json.Valid([]byte(got)) {
		t.Errorf("deep: %s", got)
	}
	if got := string(b.Bound(json.RawMessage(many))); !strings.HasSuffix(got, `,1,"…[cut 44 items]"]`) {
		t.Errorf("many items: …%s", got[len(got)-40:])
	}
	if got := string(b.Bound(json.RawMessage("{" + strings.Join(keys, ",") + "}"))); !strings.HasSuffix(got, `"k255":255,"…":"[cut 44 keys]"}`) {
		t.Errorf("many keys: …%s", got[len(got)-40:])
	}
	b.AddSecrets("123456789")
	if got := string(b.Bound(json.RawMessage(`{"pin":123456789}`))); got != `{"pin":"[REDACTED]"}` {
		t.Errorf("numeric secret: %s", got)
	}
}

func TestBoundTotalBudget(t *testing.T) {
	b := NewBounder(1024)
	item := `"` + strings.Repeat("x", 1000) + `"`
	in := "[" + strings.TrimSuffix(strings.Repeat("["+strings.Repeat(item+",", 50)+"1],", 50), ",") + "]"
	out := b.Bound(json.RawMessage(in))
	if !json.Valid(out) || len(out) > 2*b.budget || !strings.Contains(string(out), "…[cut ") {
		t.Fatalf("budget: %d bytes, valid=%v", len(out), json.Valid(out))
	}
}

func TestBoundConcurrent(t *testing.T) {
	b := NewBounder(64)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			secret := fmt.Sprintf("secret-%d", i)
			b.AddSecrets(secret)
			for range 100 {
				out := b.Bound(json.RawMessage(`{"v":"x ` + secret + ` y"}`))
				if strings.Contains(string(out), secret) {
					t.Errorf("secret %s leaked: %s", secret, out)
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzBound(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `[1,2,[3,{"x":null}]]`, `"tok-SECRET-tok"`, "\"\xff\xfe\"", `{"SECRET":1e9}`, `12`,
		` { "a" : [ 1 , true , null, -0.5e3 ] , "a":{} } `, strings.Repeat("[", 17) + strings.Repeat("]", 17),
		"[\"\u2028\"]", `1 2`, `{"a":"x"`, `"0123456789abcdefghij"`} {
		f.Add([]byte(s), 8)
	}
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		b := NewBounder(max % 4096)
		b.AddSecrets("SECRET")
		out := b.Bound(in)
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("invalid output %q for %q", out, in)
		}
		if strings.Contains(string(out), "SECRET") {
			t.Fatalf("secret leaked: %s", out)
		}
		// Redact keeps everything but the secret: the same value as the
		// input's, once the secret is put back.
		red := b.Redact(in)
		if !utf8.Valid(red) {
			t.Fatalf("Redact(%q) = %q, not UTF-8", in, red)
		}
		if json.Valid(in) {
			var got, want any
			back := bytes.ReplaceAll(red, []byte(redacted), []byte("SECRET"))
			if json.Unmarshal(back, &got) != nil || json.Unmarshal(in, &want) != nil || !reflect.DeepEqual(got, want) ||
				strings.Contains(string(red), "SECRET") {
				t.Fatalf("Redact(%q) = %q", in, red)
			}
		} else if !bytes.HasPrefix(red, []byte(`{"invalidJSONBytes":`)) {
			t.Fatalf("Redact of invalid JSON %q: %q", in, red)
		}
		known := b.known.Load()
		if fast, ok := b.small(in, known); ok {
			if slow := b.decode(in, known); !bytes.Equal(fast, slow) {
				t.Fatalf("small %q, decoded %q, for %q", fast, slow, in)
			}
		}
	})
}

// TestRedact: a person deciding on a call sees every byte of its arguments
// but the secrets, however they are spelled.
func TestRedact(t *testing.T) {
	b := NewBounder(16)
	b.AddSecrets("hunter2-token")
	long := strings.Repeat("x", 100)
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	for _, c := range []struct{ in, want string }{
		{`{"command":"` + long + `"}`, `{"command":"` + long + `"}`}, // nothing cut
		{deep, deep},
		{`{"command":"curl -H 'Authorization: hunter2-token' x"}`, `{"command":"curl -H 'Authorization: [REDACTED]' x"}`},
		{`{"pw":"hunter2-tok\u0065n"}`, `{"pw":"[REDACTED]"}`},
		{`{"hunter2-token":1, "n": 123456789012345678901}`, `{"[REDACTED]":1,"n":123456789012345678901}`},
		{`{"a":`, `{"invalidJSONBytes":5}`},
		{"\"a\xffb\"", "\"a\ufffdb\""},
	} {
		if got := string(b.Redact(json.RawMessage(c.in))); got != c.want {
			t.Errorf("Redact(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := b.RedactText("stdin: hunter2-token\n"); got != "stdin: [REDACTED]\n" {
		t.Errorf("RedactText: %q", got)
	}
}

// The usual arguments take the short way; what it cannot vouch for does not.
func TestBoundSmall(t *testing.T) {
	b := NewBounder(64)
	b.AddSecrets("hunter22")
	for _, c := range []struct {
		in, want string
		small    bool
	}{
		{`{"argv": ["true"], "timeout": 30}`, `{"argv":["true"],"timeout":30}`, true},
		{`{"a":{"b":[1,2.5e3,null,false]}}`, `{"a":{"b":[1,2.5e3,null,false]}}`, true},
		{`{"pw":"hunter22"}`, `{"pw":"[REDACTED]"}`, false},
		{`{"pw":"hunter\u0032\u0032"}`, `{"pw":"[REDACTED]"}`, false}, // an escape hides it from a substring search
		{`"` + strings.Repeat("x", 70) + `"`, `"` + strings.Repeat("x", 64) + `…[cut 6 bytes]"`, false},
		{strings.Repeat("[", 17) + strings.Repeat("]", 17), "", false},
		{"\"\xff\"", `"` + "\ufffd" + `"`, false},
		{`{"a":1} x`, `{"invalidJSONBytes":9}`, false},
	} {
		_, small := b.small([]byte(c.in), b.known.Load())
		out := b.Bound(json.RawMessage(c.in))
		if small != c.small || (c.want != "" && string(out) != c.want) {
			t.Errorf("%s: small %v, %s; want %v, %s", c.in, small, out, c.small, c.want)
		}
	}
}

// BenchmarkBound bounds an exec call's arguments for its entry, the short
// way beside the decoder's, and arguments holding a secret (the decoder's).
//
//	go test ./internal/host/audit -run '^$' -bench Bound -benchmem
func BenchmarkBound(b *testing.B) {
	bd := NewBounder(1024)
	bd.AddSecrets("hunter2-token", "ghp_abcdefghijklmnop")
	known := bd.known.Load()
	usual := json.RawMessage(`{"argv":["sh","-c","go test ./... 2>&1 | tail -20"],"cwd":"/workspace/src","timeout":"2m"}`)
	secret := json.RawMessage(`{"command":"curl -H 'Authorization: hunter2-token' https://example.com/x","env":{"A":"1","B":"2"},"timeout":30}`)
	for _, c := range []struct {
		name  string
		bound func() json.RawMessage
	}{
		{"usual", func() json.RawMessage { return bd.Bound(usual) }},
		{"usual-decoded", func() json.RawMessage { return bd.decode(usual, known) }},
		{"secret", func() json.RawMessage { return bd.Bound(secret) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.bound()
			}
		})
	}
}
