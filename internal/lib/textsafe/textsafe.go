// Package textsafe renders text that an agent controls — a command, a tool
// name, a model's words, a process's output — for a person to read: what a
// terminal or a page receives is plain visible text, never an instruction
// to it. Escape sequences (clear the screen, rewrite a line, set the window
// title, write the clipboard with OSC 52), carriage returns and newlines
// that forge lines, bidirectional overrides and other invisible format
// characters that reorder or hide what a person reads, and bytes that are
// not UTF-8 are all shown as visible escapes:
//
//	\n \r \t         line feed, carriage return, tab (Line; Text keeps \n and \t)
//	\x1b \x7f        the other C0 controls and DEL
//	\u009b \u202e    C1 controls, format characters (Cf), line and paragraph
//	                 separators, default-ignorable code points
//	\U000e0041       the same above U+FFFF (tag characters)
//	\xff             a byte that is not part of valid UTF-8
//
// A backslash is left as it is: the escapes exist to keep the terminal and
// the reader's eye safe, not to round-trip, and commands are full of
// backslashes a person wants to read unchanged.
//
// JSON keeps a JSON document the same value for any reader while escaping
// those characters inside its strings, for the commands whose rendering for
// people is JSON (`audit show ID`). Output a person asked for raw — `toolgate
// exec`'s stdout, `toolgate read` — is their own data and does not pass
// through here.
//
// It imports nothing of ours, so the Go CLI links it at no cost.
package textsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Line renders s as one line: every character listed in the package
// comment, newline and tab included, is escaped.
func Line(s string) string { return render(s, false) }

// Text renders s keeping its newlines and tabs (a block of output, a
// model's prose); everything else is escaped as Line does.
func Text(s string) string { return render(s, true) }

// Clip renders s as Line does, after cutting it to at most n bytes (Cut);
// a cut ends in "…". It reports how many bytes of s were left out, so a
// caller can say where the rest is.
func Clip(s string, n int) (line string, cut int) {
	head, cut := Cut(s, n)
	if cut == 0 {
		return Line(s), 0
	}
	return Line(head) + "…", cut
}

// Cut returns at most n bytes of s, cut on a rune boundary (rendering
// never shows half a character as bytes), and how many bytes it left out.
func Cut(s string, n int) (head string, cut int) {
	if len(s) <= n {
		return s, 0
	}
	keep := max(n, 0)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep], len(s) - keep
}

// Unsafe reports whether r is shown escaped: a control character (C0 but
// tab and newline, DEL, C1), a format character (Cf: the bidirectional
// overrides and isolates U+202A–U+202E and U+2066–U+2069, zero-width
// characters, tag characters …), a line or paragraph separator, or another
// default-ignorable code point (invisible fillers such as U+3164).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return r != '\n' && r != '\t'
	case r < 0x80:
		return false
	case r <= 0x9f:
		return true
	case r < 0xad: // the common Latin-1 letters and signs, without a table lookup
		return false
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Other_Default_Ignorable_Code_Point)
}

// render escapes s; with keepLines, newlines and tabs stay.
func render(s string, keepLines bool) string {
	i := safePrefix(s, keepLines)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\n' || r == '\t':
			if keepLines {
				b.WriteByte(byte(r))
			} else if r == '\n' {
				b.WriteString(`\n`)
			} else {
				b.WriteString(`\t`)
			}
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case Unsafe(r):
			writeU(&b, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// safePrefix is the length of s's leading run that needs no escape.
func safePrefix(s string, keepLines bool) int {
	i := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(keepLines && (c == '\n' || c == '\t')) {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || Unsafe(r) {
			return i
		}
		i += n
	}
	return i
}

// JSON returns the JSON document doc with every character Unsafe (and any
// byte that is not UTF-8) inside its strings written as a \u escape: the
// same value for any JSON reader, safe to print. Outside strings JSON is
// ASCII, so the whole document can be rewritten without parsing it; a raw
// control character (which valid JSON never has) is escaped too, and a
// byte that is not UTF-8 becomes \ufffd, as a JSON decoder reads it.
func JSON(doc []byte) []byte {
	i := safePrefix(string(doc), true)
	if i == len(doc) {
		return doc
	}
	out := make([]byte, 0, len(doc)+32)
	out = append(out, doc[:i]...)
	for i < len(doc) {
		r, n := utf8.DecodeRune(doc[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, `\ufffd`...)
		case Unsafe(r):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				out = appendU4(out, r1)
				r = r2
			}
			out = appendU4(out, r)
		default:
			out = append(out, doc[i:i+n]...)
		}
		i += n
	}
	return out
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

// writeU writes r as \uXXXX, or \UXXXXXXXX above U+FFFF.
func writeU(b *strings.Builder, r rune) {
	if r > 0xffff {
		b.WriteString(`\U`)
		b.WriteString(pad(strconv.FormatInt(int64(r), 16), 8))
		return
	}
	b.WriteString(`\u`)
	b.WriteString(pad(strconv.FormatInt(int64(r), 16), 4))
}

func appendU4(out []byte, r rune) []byte {
	return append(append(out, `\u`...), pad(strconv.FormatInt(int64(r), 16), 4)...)
}

func pad(h string, n int) string {
	if len(h) >= n {
		return h
	}
	return strings.Repeat("0", n-len(h)) + h
}
