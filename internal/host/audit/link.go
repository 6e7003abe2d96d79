package audit

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"time"
)

// Verify needs of a line only its link (prev and hash), but must reject
// every line parseLine rejects. Decoding each line into an Entry made it
// CPU-bound at ~150-200k entries/s. fastLink checks a line in the form the
// writer writes (compact JSON, the Entry's own keys in order) without
// decoding it: it accepts only lines json.Unmarshal into an Entry accepts,
// with the same prev and hash, and gives up on anything else, which
// parseLine then decides. FuzzFastLink holds it to that.

// How a field of gateway.Entry decodes.
type fieldKind uint8

const (
	fString fieldKind = iota // a JSON string (null gives up: the writer never writes it)
	fTime                    // time.Time: what its UnmarshalJSON takes
	fRaw                     // json.RawMessage: any value
	fFloat                   // *float64: a number that fits
	fInt                     // *int: an integer that fits
	fAnyMap                  // map[string]any: an object whose numbers fit a float64
	fPrev                    // string, returned
	fType                    // string, returned (escaped: gives up)
	fHash                    // string, must be the hash the line ends with
)

type entryField struct {
	key  []byte // `"name":`
	kind fieldKind
}

// entryFields are gateway.Entry's JSON keys, as the writer writes them, in
// its order; TestEntryFieldsMatchEntry keeps them in step.
var entryFields = func() []entryField {
	var out []entryField
	for _, f := range []struct {
		name string
		kind fieldKind
	}{
		{"ts", fTime}, {"id", fString}, {"phase", fString}, {"agent", fString}, {"type", fType},
		{"tool", fString}, {"via", fString}, {"args", fRaw}, {"decision", fString}, {"rule", fString},
		{"reason", fString}, {"durationMs", fFloat}, {"exitCode", fInt}, {"error", fString},
		{"session", fString}, {"parent", fString}, {"detail", fAnyMap}, {"prev", fPrev}, {"hash", fHash},
	} {
		out = append(out, entryField{[]byte(`"` + f.name + `":`), f.kind})
	}
	return out
}()

// maxFastDepth: deeper values are left to encoding/json (its limit is 10000).
const maxFastDepth = 100

// fastLink returns the prev and type of a line (without its newline) that
// claims hash claimed, when the line is an entry in the writer's form; ok
// is false when it cannot tell, not only when the line is bad. The line's
// own hash is the caller's check.
func fastLink(line, claimed []byte) (prev, typ []byte, ok bool) {
	s := scanner{b: line}
	if !s.byte('{') {
		return nil, nil, false
	}
	hasPrev := false
	// Keys in the writer's order, each once: a line with keys out of that
	// order, repeated, unknown or escaped decodes by rules not worth
	// copying here.
	for j := 0; ; j++ {
		if j > 0 && !s.byte(',') {
			return prev, typ, hasPrev && j == len(entryFields) && s.byte('}') && s.i == len(s.b)
		}
		for j < len(entryFields) && !bytes.HasPrefix(s.b[s.i:], entryFields[j].key) {
			j++
		}
		if j == len(entryFields) {
			return nil, nil, false
		}
		s.i += len(entryFields[j].key)
		hasPrev = hasPrev || entryFields[j].kind == fPrev
		out := &prev
		if entryFields[j].kind == fType {
			out = &typ
		}
		if !s.field(entryFields[j].kind, claimed, out) {
			return nil, nil, false
		}
	}
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// field reads a value of kind; a prev's or type's into out.
func (s *scanner) field(kind fieldKind, claimed []byte, out *[]byte) bool {
	start := s.i
	switch kind {
	case fRaw:
		return s.value(0, false)
	case fAnyMap:
		return s.i < len(s.b) && s.b[s.i] == '{' && s.value(0, true)
	case fFloat, fInt:
		num, ok := s.number()
		if !ok {
			return false
		}
		if kind == fInt {
			_, err := strconv.ParseInt(string(num), 10, 64)
			return err == nil
		}
		_, err := strconv.ParseFloat(string(num), 64)
		return err == nil
	}
	v, plain, ok := s.str()
	switch {
	case !ok:
		return false
	case kind == fTime:
		var t time.Time
		return plain && t.UnmarshalJSON(s.b[start:s.i]) == nil
	case kind == fPrev, kind == fType:
		*out = v
		return plain
	case kind == fHash:
		return plain && bytes.Equal(v, claimed)
	}
	return true
}

// str reads a JSON string and returns its content between the quotes; plain
// when that content is its value: no escapes, only ASCII (encoding/json
// replaces invalid UTF-8). It accepts exactly the strings encoding/json does.
func (s *scanner) str() (v []byte, plain, ok bool) {
	if !s.byte('"') {
		return nil, false, false
	}
	start, high := s.i, uint64(0)
	plain = true
	for s.i < len(s.b) {
		// Eight bytes at a time while none of them is special.
		for s.i+8 <= len(s.b) {
			x := binary.LittleEndian.Uint64(s.b[s.i:])
			q, bs := x^(lsb*'"'), x^(lsb*'\\')
			if ((x-lsb*0x20)&^x|(q-lsb)&^q|(bs-lsb)&^bs)&msb != 0 {
				break
			}
			high |= x
			s.i += 8
		}
		if s.i == len(s.b) {
			break
		}
		c := s.b[s.i]
		if !strSpecial[c] {
			high |= uint64(c)
			s.i++
			continue
		}
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], plain && high&msb == 0, true
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex4(s.b[s.i+2:s.i+6]) {
					return nil, false, false
				}
				s.i += 6
			default:
				return nil, false, false
			}
		default: // a control character
			return nil, false, false
		}
	}
	return nil, false, false
}

// For testing eight bytes at once: a byte of x is below 0x20, or zero,
// when ((x - lsb*0x20) &^ x) & msb has its top bit (a borrow can mark the
// bytes above a marked one too, never a word with none marked).
const lsb, msb = 0x0101010101010101, 0x8080808080808080

// strSpecial marks the bytes that end a run of a string's plain bytes.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// number reads a JSON number (RFC 8259 grammar).
func (s *scanner) number() ([]byte, bool) {
	start := s.i
	s.byte('-')
	switch {
	case s.byte('0'):
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return nil, false
	}
	if s.byte('.') && !s.digits() {
		return nil, false
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if !s.digits() {
			return nil, false
		}
	}
	return s.b[start:s.i], true
}

// digits reads one or more decimal digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// value reads one compact JSON value (no whitespace: the writer writes
// none; a line with any is left to encoding/json). With fitFloat, numbers
// must fit a float64, as they must to decode into an any.
func (s *scanner) value(depth int, fitFloat bool) bool {
	if s.i >= len(s.b) || depth > maxFastDepth {
		return false
	}
	switch c := s.b[s.i]; c {
	case '"':
		_, _, ok := s.str()
		return ok
	case '{', '[':
		s.i++
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		if s.byte(end) {
			return true
		}
		for {
			if c == '{' {
				if _, _, ok := s.str(); !ok || !s.byte(':') {
					return false
				}
			}
			if !s.value(depth+1, fitFloat) {
				return false
			}
			if s.byte(end) {
				return true
			}
			if !s.byte(',') {
				return false
			}
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	num, ok := s.number()
	if ok && fitFloat {
		_, err := strconv.ParseFloat(string(num), 64)
		return err == nil
	}
	return ok
}

func (s *scanner) literal(lit string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}
