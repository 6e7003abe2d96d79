package mcp

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

func FuzzParseSkill(f *testing.F) {
	f.Add([]byte("---\nname: a\ndescription: d\n---\nbody"))
	f.Add([]byte("---\r\nname: [x\r\n---"))
	f.Add([]byte("\uFEFF---\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseSkill(b)
		if err == nil && (strings.TrimSpace(m.Name) == "" || strings.TrimSpace(m.Description) == "") {
			t.Fatalf("accepted without name/description: %+v", m)
		}
	})
}

func FuzzCheckSkillURI(f *testing.F) {
	for _, s := range []string{"skill://global/a", "skill://global/../x", "skill:///etc", "skill://a/b%2f..", "file:///x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		if CheckSkillURI(uri) != nil {
			return
		}
		// Whatever passes names exactly one scope and one plain name.
		rest := strings.TrimPrefix(uri, "skill://")
		scope, name, ok := strings.Cut(rest, "/")
		if !ok || !validName().MatchString(scope) || !validName().MatchString(name) || strings.Contains(uri, "..") {
			t.Fatalf("accepted %q", uri)
		}
	})
}

func FuzzResourcesOnly(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`)
	f.Add(`[{"method":"resources/read"},{"method":"tools/call"}]`)
	f.Add(`{"method":"notifications/initialized"}`)
	f.Add(`{"result":{}}`)
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		admitted := ResourcesOnly(r)
		// Whatever is admitted, any decoder reads as resource methods only:
		// check with a case-insensitive, last-key-wins one (encoding/json).
		if admitted {
			var msgs []map[string]any
			if json.Unmarshal([]byte(body), &msgs) != nil {
				var m map[string]any
				json.Unmarshal([]byte(body), &m)
				msgs = append(msgs, m)
			}
			for _, m := range msgs {
				for k, v := range m {
					if s, ok := v.(string); ok && strings.EqualFold(k, "method") && !resourceMethods[s] && !isNotification(s) {
						t.Fatalf("admitted method %q: %q", s, body)
					}
				}
			}
		}
		// The body is still readable, whole, by the next layer.
		b := make([]byte, len(body)+1)
		n, _ := r.Body.Read(b)
		if len(body) <= 1<<20 && string(b[:n]) != body {
			t.Fatalf("body not restored")
		}
		_ = batchLen([]byte(body))
	})
}
