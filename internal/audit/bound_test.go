package audit

import (
	"encoding/json"
	"fmt"
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
	for _, s := range []string{`{"a":"b"}`, `[1,2,[3,{"x":null}]]`, `"tok-SECRET-tok"`, "\"\xff\xfe\"", `{"SECRET":1e9}`, `12`} {
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
	})
}
