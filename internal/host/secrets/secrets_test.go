package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/config"
)

const value = "ghp_ThisIsTheSecretValue123"

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask-proof
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	t.Setenv("TG_TEST_SECRET", "from-the-environment")
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "keyfile"), "from-a-file\n", 0o600)
	writeFile(t, filepath.Join(home, FileName), `
secrets:
  gh_token: {value: "`+value+`", agents: [demo], tools: [gh]}
  key:      {file: keyfile, agents: ["*"], tools: [git]}
`, 0o600)
	s, err := Load(home, map[string]config.Secret{"env_tok": {Env: "TG_TEST_SECRET", Agents: []string{"*"}, Tools: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ agent, tool, name, want string }{
		{"demo", "gh", "gh_token", value},
		{"any", "git", "key", "from-a-file"},
		{"x", "y", "env_tok", "from-the-environment"},
	} {
		if got, err := s.Resolve(tc.agent, tc.tool, tc.name); err != nil || got != tc.want {
			t.Errorf("Resolve(%s, %s, %s) = %q, %v", tc.agent, tc.tool, tc.name, got, err)
		}
	}
	if got := strings.Join(s.Values(), ","); got != value+",from-the-environment,from-a-file" {
		t.Errorf("Values() = %s (want longest first)", got)
	}
	if got := s.Redact("token " + value + " and from-a-file"); got != "token [REDACTED] and [REDACTED]" {
		t.Errorf("Redact = %q", got)
	}
}

func TestLoadRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		mode       os.FileMode
		config     map[string]config.Secret
		want       string
	}{
		{"world readable", `secrets: {a: {value: "` + value + `"}}`, 0o644, nil, "mode 0644 lets other users read secrets"},
		{"group readable", `secrets: {a: {value: "` + value + `"}}`, 0o640, nil, "mode 0640"},
		{"value in config", "", 0, map[string]config.Secret{"a": {Value: value}}, "secrets.a.value: literal values belong in HOME/secrets.yaml"},
		{"defined twice", `secrets: {a: {value: "` + value + `"}}`, 0o600, map[string]config.Secret{"a": {Env: "HOME"}}, `secret "a" is also defined in the config file`},
		{"unset env", "", 0, map[string]config.Secret{"a": {Env: "TG_TEST_UNSET_VARIABLE"}}, "environment variable TG_TEST_UNSET_VARIABLE is not set"},
		{"missing file", "", 0, map[string]config.Secret{"a": {File: "nope"}}, "no such file"},
		{"too short", `secrets: {a: {value: "abc"}}`, 0o600, nil, "too short to be redacted"},
		{"two sources", "", 0, map[string]config.Secret{"a": {Env: "HOME", File: "x"}}, "exactly one of value, env, file"},
		{"bad name", "", 0, map[string]config.Secret{"a b": {Env: "HOME"}}, "secret names are"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.file != "" {
				writeFile(t, filepath.Join(home, FileName), tc.file, tc.mode)
			}
			_, err := Load(home, tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), value) {
				t.Errorf("error shows the value: %v", err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"empty", "", ""},
		{"ok", "secrets:\n  a: {value: x1234, agents: [demo], tools: ['*']}\n", ""},
		{"unknown top", "secret: {}\n", "f:1: secret: unknown field"},
		{"unknown field", "secrets:\n  a: {valu: " + value + "}\n", "f:2: secrets.a.valu: unknown field"},
		{"value not string", "secrets:\n  a: {value: [" + value + "]}\n", "f:2: secrets.a.value: expected a string"},
		{"secret not mapping", "secrets:\n  a: " + value + "\n", "f:2: secrets.a: expected a mapping"},
		{"agents not list", "secrets:\n  a: {value: " + value + ", agents: demo}\n", "secrets.a.agents: expected a list"},
		{"duplicate", "secrets:\n  a: {value: " + value + "}\n  a: {value: " + value + "}\n", "f:3: secrets.a: defined twice"},
		{"alias", "secrets:\n  a: &x {value: " + value + "}\n  b: *x\n", "aliases are not allowed"},
		{"syntax", "secrets: {a: {value: \"" + value + "}\n", "f: line 2: invalid YAML"},
		{"two documents", "secrets: {}\n---\nsecrets: {}\n", "only one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f", []byte(tc.data))
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), value):
				t.Errorf("error shows the value: %v", err)
			}
		})
	}
}

func TestResolveScope(t *testing.T) {
	s, err := New("", map[string]config.Secret{
		"none":   {Value: value},
		"demo":   {Value: value + "1", Agents: []string{"demo"}, Tools: []string{"gh"}},
		"agents": {Value: value + "2", Agents: []string{"*"}},
		"all":    {Value: value + "3", Agents: []string{"*"}, Tools: []string{"*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent, tool, name string
		ok                bool
	}{
		{"demo", "gh", "none", false}, // empty lists grant nothing
		{"demo", "gh", "demo", true},
		{"demo", "git", "demo", false},
		{"other", "gh", "demo", false},
		{"demo", "gh", "agents", false}, // "*" agents, no tools
		{"x", "y", "all", true},
		{"demo", "gh", "undefined", false},
	} {
		v, err := s.Resolve(tc.agent, tc.tool, tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("Resolve(%s, %s, %s) err = %v, want ok=%v", tc.agent, tc.tool, tc.name, err, tc.ok)
		}
		if err != nil && (v != "" || strings.Contains(err.Error(), value)) {
			t.Errorf("refusal leaks: %q, %v", v, err)
		}
	}
	var nilStore *Store
	if _, err := nilStore.Resolve("a", "b", "c"); err == nil || nilStore.Redact(value) != value || nilStore.Has("c") {
		t.Error("a nil store must hold nothing")
	}
}

func TestExpand(t *testing.T) {
	lookup := func(name string) (string, error) {
		if name == "tok" {
			return value, nil
		}
		return "", errors.New("no " + name)
	}
	for _, tc := range []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"{{secret:tok}}", value, ""},
		{"Bearer {{secret:tok}}!{{secret:tok}}", "Bearer " + value + "!" + value, ""},
		{"{{other}} {{ secret:tok }}", "{{other}} {{ secret:tok }}", ""},
		{"{{secret:nope}}", "", "no nope"},
		{"{{secret:tok", "", "unterminated"},
		{"{{secret: tok}}", "", "not a secret name"},
		{"{{secret:}}", "", "not a secret name"},
	} {
		got, err := Expand(tc.in, lookup)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q = %q, %v", tc.in, got, err)
		}
	}
}

func TestWriterSplitsAcrossWrites(t *testing.T) {
	s, err := New("", map[string]config.Secret{"a": {Value: "abcd"}, "b": {Value: "abcdef"}, "c": {Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	in := "x abcdef y abcdabcd z abcde " + value + " Password: "
	want := s.Redact(in)
	for chunk := 1; chunk <= len(in); chunk++ {
		var out bytes.Buffer
		w := s.NewWriter(&out).(*Writer)
		for i := 0; i < len(in); i += chunk {
			if _, err := w.Write([]byte(in[i:min(i+chunk, len(in))])); err != nil {
				t.Fatal(err)
			}
		}
		// Nothing that cannot become a secret is held back: a prompt
		// reaches the caller before the stream ends.
		if !strings.HasSuffix(out.String(), "Password: ") {
			t.Fatalf("chunk %d: prompt held back: %q", chunk, out.String())
		}
		if err := w.Flush(); err != nil || out.String() != want {
			t.Fatalf("chunk %d: %q, want %q", chunk, out.String(), want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"{{secret:a}}", "x{{secret:a.b-c_d}}y{{secret:", "{{secret:}}", "{{{{secret:a}}}}", "{{secret:a}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		calls := 0
		got, err := Expand(s, func(name string) (string, error) {
			if !nameRE().MatchString(name) {
				t.Fatalf("lookup of invalid name %q", name)
			}
			calls++
			return "<" + name + ">", nil
		})
		if !strings.Contains(s, placeholder) && (err != nil || got != s) {
			t.Fatalf("%q without placeholders became %q, %v", s, got, err)
		}
		names, rerr := References(s)
		if (err == nil) != (rerr == nil) || (err == nil && len(names) != calls) {
			t.Fatalf("%q: References %v, %v; Expand %v with %d lookups", s, names, rerr, err, calls)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add("secrets:\n  a: {value: x1234, agents: [demo], tools: ['*']}\n")
	f.Add("secrets: {a: &x {env: HOME}, b: *x}\n")
	f.Add("secrets: {a: {file: [1]}}\n")
	f.Fuzz(func(t *testing.T, data string) {
		defs, err := Parse("f", []byte(data))
		if err != nil {
			return
		}
		if err := check(defs, true); err != nil {
			t.Fatalf("Parse accepted what check refuses: %v", err)
		}
	})
}

func FuzzWriter(f *testing.F) {
	f.Add("abcd", "efgh", "xxabcdefghabcdyy", 3)
	f.Add("aaaa", "aaab", "aaaaaaabaaaa", 1)
	f.Fuzz(func(t *testing.T, v1, v2, in string, chunk int) {
		if len(v1) < minLen || len(v2) < minLen || chunk <= 0 {
			return
		}
		s, err := New("", map[string]config.Secret{"a": {Value: v1}, "b": {Value: v2}})
		if err != nil {
			return
		}
		var out bytes.Buffer
		w := s.NewWriter(&out).(*Writer)
		for i := 0; i < len(in); i += chunk {
			_, _ = w.Write([]byte(in[i:min(i+chunk, len(in))]))
		}
		_ = w.Flush()
		if want := s.Redact(in); out.String() != want {
			t.Fatalf("streamed %q, want %q", out.String(), want)
		}
	})
}
