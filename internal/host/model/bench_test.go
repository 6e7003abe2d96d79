package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchBody is a request as a coding agent sends it late in a session:
// 40 tools with schemas and 400 turns of text, about 1 MiB.
func benchBody() []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"You are a coding agent."}],"tools":[`)
	for i := range 40 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tool_%d","description":%q,"input_schema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path"]}}`, i, strings.Repeat("Does a thing. ", 20))
	}
	b.WriteString(`],"messages":[`)
	for i := range 400 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":[{"type":"text","text":%q}]}`, strings.Repeat("some file contents \"quoted\" and\nnewlines ", 60))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// ParseRequest beside encoding/json reading the same facts the way the
// door did before it matched keys exactly (a struct decode plus a scan for
// duplicate top-level keys):
//
//	go test -run XXX -bench ParseRequest -benchmem ./internal/host/model/
func BenchmarkParseRequest(b *testing.B) {
	body := benchBody()
	b.Run("exact", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := ParseRequest(Messages, body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var r struct {
				Model     *string `json:"model"`
				MaxTokens *int64  `json:"max_tokens"`
				Stream    *bool   `json:"stream"`
				Tools     []struct {
					Type, Name string
				} `json:"tools"`
			}
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.Token()
			for dec.More() {
				dec.Token()
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
