package auditquery

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestValuesRoundTrip: every field a query has reaches the other side as
// it was given, empty ones left out of the URL.
func TestValuesRoundTrip(t *testing.T) {
	since := time.Date(2026, 12, 1, 8, 0, 0, 123456789, time.UTC)
	for _, q := range []Query{
		{},
		{ID: "18ed0cfbfd94ff20bf07a49b2d0b52c4"},
		{Agent: "demo", Tool: "exec", Type: "core_tool", Decision: "deny", Rule: "no-rm-rf", Session: "S", Parent: "P",
			Phase: "decision", Text: `rm -rf "/" & x=1;#`, Since: since, Until: since.Add(time.Hour), Limit: 20, After: 77, Newest: true, AllAgents: true},
	} {
		v := q.Values()
		for name, vals := range v {
			if len(vals) != 1 || vals[0] == "" {
				t.Errorf("%+v: parameter %s is %q", q, name, vals)
			}
		}
		got, err := Parse(v)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		want := q
		if want.Limit == 0 {
			want.Limit = 100
		}
		if !got.Since.Equal(want.Since) || !got.Until.Equal(want.Until) {
			t.Errorf("times: got %v..%v, want %v..%v", got.Since, got.Until, want.Since, want.Until)
		}
		got.Since, got.Until, want.Since, want.Until = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

// TestParseRefuses: a parameter the query does not have, one given twice,
// a value that does not parse or is out of range is a bad query naming it,
// never a broader answer.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ raw, says string }{
		{"agnet=demo", `no parameter "agnet"`},
		{"agent=a&agent=b", "agent given 2 times"},
		{"limit=ten", "limit"},
		{"limit=-1", "limit -1"},
		{"limit=10001", "limit 10001"},
		{"after=-3", "after -3"},
		{"after=1e3", "after"},
		{"since=yesterday", "since"},
		{"until=2026-13-01T00:00:00Z", "until"},
		{"since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", "until is before since"},
		{"newest=maybe", "newest"},
		{"decision=denied", `no entry has decision "denied"`},
		{"type=exec", `no entry has type "exec"`},
		{"phase=results", `no entry has phase "results"`},
	} {
		v, err := url.ParseQuery(tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse(v)
		if !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want a bad query saying %q", tc.raw, err, tc.says)
		}
	}
}

// FuzzParse: whatever a request's query string holds, Parse answers a
// checked query or a bad query, and a query it accepts survives the trip
// through Values unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "agent=demo&limit=5", "text=rm+-rf&newest=1", "since=2026-12-01T08:00:00.5Z&after=9",
		"id=%00%ff", "limit=0", "a=1&a=2", "text=%22%27%3B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := Parse(v)
		if err != nil {
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("%q: %v is not a bad query", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > MaxLimit || q.After < 0 {
			t.Fatalf("%q: accepted %+v", raw, q)
		}
		again, err := Parse(q.Values())
		if err != nil {
			t.Fatalf("%q: %+v does not parse back: %v", raw, q, err)
		}
		if !again.Since.Equal(q.Since) || !again.Until.Equal(q.Until) {
			t.Fatalf("%q: times changed: %v %v", raw, again, q)
		}
		again.Since, again.Until, q.Since, q.Until = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(again, q) {
			t.Fatalf("%q: %+v came back as %+v", raw, q, again)
		}
	})
}
