package model

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// object is a JSON object as a provider reads it: each key exactly as
// written. encoding/json matches struct fields case-insensitively (with
// Unicode folding: "ſtream" is "stream") and keeps the last of two equal
// keys, while the providers match exactly; reading members here, and
// refusing the keys on which the two kinds of reader could differ, makes
// the facts policy sees the ones the provider will act on.
type object struct {
	where  string            // "the body", "tools[2]" … for errors
	values map[string][]byte // the members asked for: raw values, subslices of the body
}

// readObject reads the JSON object raw (valid JSON, checked by the caller)
// at where, keeping the members named in keys. Every key of the object must
// be unique, and none may fold onto one of keys while spelled otherwise.
func readObject(raw []byte, where string, keys ...string) (object, error) {
	o := object{where: where, values: map[string][]byte{}}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return o, badRequest("%s is not a JSON object", where)
	}
	seen := map[string]struct{}{}
	for i = skipSpace(raw, i+1); raw[i] != '}'; {
		end := skipString(raw, i)
		key, err := unquote(raw[i:end])
		if err != nil {
			return o, badRequest("%s has an unreadable key", where)
		}
		if _, dup := seen[key]; dup {
			return o, badRequest("%s names the field %q twice", where, bound(key))
		}
		seen[key] = struct{}{}
		read := false
		for _, k := range keys {
			if key == k {
				read = true
			} else if strings.EqualFold(key, k) {
				return o, badRequest("%s has the field %q, which a case-insensitive reader takes for %q: spell it %q or leave it out", where, bound(key), k, k)
			}
		}
		i = skipSpace(raw, skipSpace(raw, end)+1) // past the colon
		vend := skipValue(raw, i)
		if read {
			o.values[key] = raw[i:vend]
		}
		if i = skipSpace(raw, vend); raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return o, nil
}

// raw is a member's value; ok is false when it is missing or null, which
// the providers treat alike.
func (o object) raw(key string) ([]byte, bool) {
	v, ok := o.values[key]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// decode reads a member into v (a *string, *int64, *bool …) with its JSON
// type checked: "stream":"true" is refused, not read as false.
func (o object) decode(key string, v any) (bool, error) {
	raw, ok := o.raw(key)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, badRequest("%s.%s has the wrong type", o.where, key)
	}
	return true, nil
}

// text reads a string member that becomes a fact: bounded, and without
// U+FFFD, which is what encoding/json makes of a lone surrogate escape
// ("\ud800") that other readers keep as it is.
func (o object) text(key string, limit int) (string, error) {
	raw, ok := o.raw(key)
	if !ok {
		return "", nil
	}
	return textOf(raw, o.where+"."+key, limit)
}

func textOf(raw []byte, where string, limit int) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) != nil || len(s) > limit || strings.ContainsRune(s, utf8.RuneError) {
		return "", badRequest("%s is not a string of at most %d bytes of text", where, limit)
	}
	return s, nil
}

// object reads a member that must be an object (or missing, or null:
// an object without members).
func (o object) object(key string, keys ...string) (object, error) {
	raw, ok := o.raw(key)
	if !ok {
		return object{where: o.where + "." + key}, nil
	}
	return readObject(raw, o.where+"."+key, keys...)
}

// inner reads the text member sub of the object member key, as text does.
func (o object) inner(key, sub string, limit int) (string, error) {
	in, err := o.object(key, sub)
	if err != nil {
		return "", err
	}
	return in.text(sub, limit)
}

// list reads a member that must be an array (or missing, or null) into its
// elements' raw values, at most limit of them.
func (o object) list(key string, limit int) ([][]byte, error) {
	raw, ok := o.raw(key)
	if !ok {
		return nil, nil
	}
	i := skipSpace(raw, 0)
	if raw[i] != '[' {
		return nil, badRequest("%s.%s is not a list", o.where, key)
	}
	var out [][]byte
	for i = skipSpace(raw, i+1); raw[i] != ']'; {
		if len(out) == limit {
			return nil, badRequest("%s.%s has more than %d entries", o.where, key, limit)
		}
		end := skipValue(raw, i)
		out = append(out, raw[i:end])
		if i = skipSpace(raw, end); raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, nil
}

// The skip functions walk JSON that json.Valid accepted, so they need no
// error paths: every string ends and every bracket closes.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i].
func skipString(b []byte, i int) int {
	for j := i + 1; ; j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i // a number, true, false or null
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
		j++
	}
	return j
}

// unquote decodes a JSON string token; most keys have no escapes.
func unquote(tok []byte) (string, error) {
	if bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1]), nil
	}
	var s string
	err := json.Unmarshal(tok, &s)
	return s, err
}

func bound(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
