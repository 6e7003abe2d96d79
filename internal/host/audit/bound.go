package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Limits of Bound beyond the string length.
const (
	maxDepth = 16  // deeper containers become a marker
	maxItems = 256 // array items / object keys kept per container
	redacted = "[REDACTED]"
)

// Bounder shrinks call arguments for the audit log: long strings are cut
// with a visible marker, deep or huge structures are bounded, invalid UTF-8
// is made valid, and known secret values are redacted. Safe for concurrent use.
type Bounder struct {
	maxString int
	budget    int // total output bytes before further items are cut

	mu      sync.Mutex // serialises AddSecrets
	secrets []string
	known   atomic.Pointer[secretSet]
}

// secretSet is what Bound reads of the secrets, replaced whole by AddSecrets.
type secretSet struct {
	values   [][]byte
	replacer *strings.Replacer
}

// NewBounder returns a Bounder cutting strings longer than maxString bytes.
func NewBounder(maxString int) *Bounder {
	maxString = max(maxString, 16)
	return &Bounder{maxString: maxString, budget: max(64*maxString, 64<<10)}
}

// AddSecrets registers values that must never appear in the log. Values
// shorter than 4 bytes are ignored: they would redact ordinary text.
func (b *Bounder) AddSecrets(values ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, v := range values {
		if len(v) >= 4 {
			b.secrets = append(b.secrets, v)
		}
	}
	// Longest first, so a secret containing another is redacted whole.
	sort.Slice(b.secrets, func(i, j int) bool { return len(b.secrets[i]) > len(b.secrets[j]) })
	set := &secretSet{}
	pairs := make([]string, 0, 2*len(b.secrets))
	for _, s := range b.secrets {
		pairs = append(pairs, s, redacted)
		set.values = append(set.values, []byte(s))
	}
	set.replacer = strings.NewReplacer(pairs...)
	b.known.Store(set)
}

// Bound returns raw bounded; input that is not one JSON value becomes
// {"invalidJSONBytes":N}.
func (b *Bounder) Bound(raw json.RawMessage) json.RawMessage {
	known := b.known.Load()
	if out, ok := b.small(raw, known); ok {
		return out
	}
	return b.decode(raw, known)
}

// small bounds the usual call's arguments, a few dozen bytes, without a
// decoder (which allocated a third of a plugin call's garbage). It applies
// only where the decoder's output is raw compacted: raw too short for a
// string, an item count or the budget to pass its limit; nesting within
// maxDepth; valid UTF-8 without U+2028/2029 (the encoder escapes them);
// and no backslash, so every key, string and number is a substring of raw
// as it is: a secret not in raw is in none of them. FuzzBound checks that
// both ways agree.
func (b *Bounder) small(raw []byte, known *secretSet) (json.RawMessage, bool) {
	if len(raw) > min(b.maxString, 2*maxItems) || bytes.IndexByte(raw, '\\') >= 0 ||
		!utf8.Valid(raw) || bytes.Contains(raw, []byte("\u2028")) || bytes.Contains(raw, []byte("\u2029")) {
		return nil, false
	}
	if known != nil && containsAny(raw, known.values) {
		return nil, false
	}
	depth, inString := 0, false
	for _, c := range raw {
		switch {
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return nil, false
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	var out bytes.Buffer
	out.Grow(len(raw))
	if json.Compact(&out, raw) != nil {
		return nil, false
	}
	return out.Bytes(), true
}

// Redact returns raw with every known secret value redacted and nothing
// cut: what a person deciding on a call is shown (a waiting approval), who
// must see all of it, through the same redaction as the log. Input that is
// not one JSON value becomes {"invalidJSONBytes":N}, as with Bound.
func (b *Bounder) Redact(raw json.RawMessage) json.RawMessage {
	known := b.known.Load()
	// Without a backslash every string is a substring of raw as it is
	// (see small), so a secret not in raw is in none of them. Invalid UTF-8
	// is made valid by the decoder, as in the log.
	if utf8.Valid(raw) && (known == nil || (bytes.IndexByte(raw, '\\') < 0 && !containsAny(raw, known.values))) {
		if !json.Valid(raw) {
			return invalidJSON(raw)
		}
		return raw
	}
	return (&boundState{b: b, whole: true}).run(raw, known)
}

// RedactText returns s with every known secret value redacted.
func (b *Bounder) RedactText(s string) string {
	if known := b.known.Load(); known != nil {
		return known.replacer.Replace(s)
	}
	return s
}

func containsAny(raw []byte, values [][]byte) bool {
	for _, v := range values {
		if bytes.Contains(raw, v) {
			return true
		}
	}
	return false
}

// decode bounds raw token by token.
func (b *Bounder) decode(raw json.RawMessage, known *secretSet) json.RawMessage {
	return (&boundState{b: b}).run(raw, known)
}

// run copies raw's one JSON value to its output, bounded (or, with whole,
// only redacted).
func (s *boundState) run(raw json.RawMessage, known *secretSet) json.RawMessage {
	if known != nil {
		s.rep = known.replacer
	}
	s.dec = json.NewDecoder(bytes.NewReader(raw))
	s.dec.UseNumber()
	s.enc = json.NewEncoder(&s.out)
	s.enc.SetEscapeHTML(false)
	if err := s.value(0); err != nil {
		return invalidJSON(raw)
	}
	if _, err := s.dec.Token(); err != io.EOF { // data after the value
		return invalidJSON(raw)
	}
	return bytes.Clone(s.out.Bytes())
}

func invalidJSON(raw []byte) json.RawMessage {
	out, _ := json.Marshal(map[string]int{"invalidJSONBytes": len(raw)})
	return out
}

type boundState struct {
	b     *Bounder
	whole bool // redact only: no string, item, depth or budget limit
	rep   *strings.Replacer
	dec   *json.Decoder
	enc   *json.Encoder
	out   bytes.Buffer
}

// value copies one JSON value from the decoder to out, bounded.
func (s *boundState) value(depth int) error {
	tok, err := s.dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth && !s.whole {
			return s.skipDeep(t)
		}
		return s.container(t, depth)
	case string:
		s.str(t, true)
	case json.Number:
		if r := s.redact(string(t)); r != string(t) {
			s.str(r, false)
		} else {
			s.out.WriteString(string(t))
		}
	case bool:
		fmt.Fprint(&s.out, t)
	case nil:
		s.out.WriteString("null")
	}
	return nil
}

// skipDeep replaces a container past maxDepth, whose opening token is read,
// with a marker.
func (s *boundState) skipDeep(open json.Delim) error {
	start := s.dec.InputOffset() - 1
	for level := 1; level > 0; {
		tok, err := s.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			level++
		case json.Delim('}'), json.Delim(']'):
			level--
		}
	}
	s.str(fmt.Sprintf("…[depth limit, cut %d bytes]", s.dec.InputOffset()-start), false)
	return nil
}

func (s *boundState) container(open json.Delim, depth int) error {
	obj := open == '{'
	s.out.WriteByte(byte(open))
	n, cut := 0, 0
	for s.dec.More() {
		if !s.whole && (n >= maxItems || s.out.Len() >= s.b.budget) {
			if obj {
				if _, err := s.dec.Token(); err != nil {
					return err
				}
			}
			var skip json.RawMessage
			if err := s.dec.Decode(&skip); err != nil {
				return err
			}
			cut++
			continue
		}
		if n > 0 {
			s.out.WriteByte(',')
		}
		if obj {
			key, err := s.dec.Token()
			if err != nil {
				return err
			}
			k, _ := key.(string)
			s.str(k, true)
			s.out.WriteByte(':')
		}
		if err := s.value(depth + 1); err != nil {
			return err
		}
		n++
	}
	if _, err := s.dec.Token(); err != nil { // the closing delimiter
		return err
	}
	if cut > 0 {
		if n > 0 {
			s.out.WriteByte(',')
		}
		marker := fmt.Sprintf("…[cut %d items]", cut)
		if obj {
			s.str("…", false)
			s.out.WriteByte(':')
			marker = fmt.Sprintf("[cut %d keys]", cut)
		}
		s.str(marker, false)
	}
	if obj {
		s.out.WriteByte('}')
	} else {
		s.out.WriteByte(']')
	}
	return nil
}

func (s *boundState) redact(v string) string {
	if s.rep == nil {
		return v
	}
	return s.rep.Replace(v)
}

// str writes v as a JSON string; with bound, redacted and cut first. The
// decoder has already replaced invalid UTF-8 with U+FFFD, and cuts fall on
// rune boundaries, so the output is valid UTF-8.
func (s *boundState) str(v string, bound bool) {
	if bound {
		v = s.redact(v)
		if !s.whole {
			v = gateway.Cut(v, s.b.maxString)
		}
	}
	_ = s.enc.Encode(v) // a string always encodes
	s.out.Truncate(s.out.Len() - 1)
}
