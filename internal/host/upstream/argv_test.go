package upstream

import (
	"encoding/json"
	"testing"
)

func TestArgsFromArgv(t *testing.T) {
	cases := []struct {
		argv []string
		want string // "" = error
	}{
		{[]string{"--json", `{"path":"a","n":3}`}, `{"path":"a","n":3}`},
		{[]string{"--path", "a b", "--limit", "3"}, `{"limit":3,"path":"a b"}`},
		{[]string{"--path=x;$(id)", "--verbose"}, `{"path":"x;$(id)","verbose":true}`},
		{[]string{"--tags", `["a"]`, "--name", `"007"`}, `{"name":"007","tags":["a"]}`},
		{[]string{}, `{}`},
		{[]string{"--json", `[1]`}, ""},
		{[]string{"--json", `{"a":1} trailing`}, ""},
		{[]string{"positional"}, ""},
		{[]string{"--a", "1", "--a", "2"}, ""},
		{[]string{"--", "x"}, ""},
	}
	for _, c := range cases {
		raw, _ := json.Marshal(map[string]any{"argv": c.argv, "cwd": "/workspace"})
		got, err := argsFromArgv(raw)
		if c.want == "" {
			if err == nil {
				t.Errorf("%q: want an error, got %s", c.argv, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.argv, err)
			continue
		}
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal([]byte(c.want), &w)
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Errorf("%q: got %s, want %s", c.argv, gb, wb)
		}
	}
}

func FuzzArgsFromArgv(f *testing.F) {
	f.Add(`{"argv":["--json","{}"]}`)
	f.Add(`{"argv":["--a","1","--b=x","--c"]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := argsFromArgv(json.RawMessage(raw))
		if err == nil && decodeObject(out) != nil {
			t.Fatalf("accepted %q but produced %s, not one object", raw, out)
		}
	})
}
