package secrets

import (
	"fmt"
	"strings"
)

// placeholder opens a secret reference: {{secret:NAME}}.
const placeholder = "{{secret:"

// Expand replaces every {{secret:NAME}} in s with lookup(NAME). Other text,
// including other {{…}}, is kept as is. A malformed reference or a failed
// lookup is an error naming the secret, never showing a value.
func Expand(s string, lookup func(name string) (string, error)) (string, error) {
	if !strings.Contains(s, placeholder) {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, placeholder)
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+len(placeholder):]
		end := strings.Index(rest, "}}")
		if end < 0 {
			return "", fmt.Errorf("unterminated %sNAME}} placeholder", placeholder)
		}
		name := rest[:end]
		if !nameRE().MatchString(name) {
			return "", fmt.Errorf("placeholder %s%s}}: not a secret name", placeholder, truncate(name))
		}
		v, err := lookup(name)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		s = rest[end+2:]
	}
}

// References reports the secret names s refers to, checking its syntax.
func References(s string) ([]string, error) {
	var names []string
	_, err := Expand(s, func(name string) (string, error) {
		names = append(names, name)
		return "", nil
	})
	return names, err
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
