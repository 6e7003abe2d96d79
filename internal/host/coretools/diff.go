package coretools

import (
	"fmt"
	"strconv"
	"strings"
)

// A unified diff, applied strictly: every context and removed line must match
// the file exactly at the position the hunk header names; no fuzz, no offset
// search. Any failing hunk fails the whole patch.

// hunk is one "@@ -a,b +c,d @@" section. Lines keep their "\n" unless a
// "\ No newline at end of file" marker followed them.
type hunk struct {
	header             string
	oldStart, oldCount int
	newStart, newCount int
	lines              []diffLine
}

type diffLine struct {
	op   byte // ' ' context, '-' removed, '+' added
	text string
}

// maxDiffCount bounds header numbers so arithmetic on them never overflows.
const maxDiffCount = 1 << 30

// parseDiff parses a unified diff of one file. Header lines (diff --git,
// index, ---, +++ …) before the first hunk are skipped; a second file's
// header after a hunk is an error.
func parseDiff(s string) ([]hunk, error) {
	lines := strings.Split(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var hunks []hunk
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], "@@") {
		i++
	}
	for i < len(lines) {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "@@"):
		case strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "diff "):
			return nil, fmt.Errorf("diff line %d: a second file header; patch one file per call", i+1)
		case strings.TrimSpace(line) == "" && allBlank(lines[i:]):
			return finishDiff(hunks)
		default:
			return nil, fmt.Errorf("diff line %d: expected a hunk header \"@@ -a,b +c,d @@\", got %q", i+1, clip(line))
		}
		h, err := parseHunkHeader(line)
		if err != nil {
			return nil, fmt.Errorf("diff line %d: %w", i+1, err)
		}
		i++
		oldSeen, newSeen := 0, 0
		for i < len(lines) {
			line := lines[i]
			if strings.HasPrefix(line, `\`) {
				// "\ No newline at end of file": the previous line has no "\n".
				if len(h.lines) == 0 || !strings.HasSuffix(h.lines[len(h.lines)-1].text, "\n") {
					return nil, fmt.Errorf("diff line %d: a no-newline marker with no line before it", i+1)
				}
				last := &h.lines[len(h.lines)-1]
				last.text = strings.TrimSuffix(last.text, "\n")
				i++
				continue
			}
			if oldSeen == h.oldCount && newSeen == h.newCount {
				break
			}
			op, text := byte(' '), ""
			if line != "" { // some tools strip the space of an empty context line
				op, text = line[0], line[1:]
			}
			switch op {
			case ' ':
				oldSeen++
				newSeen++
			case '-':
				oldSeen++
			case '+':
				newSeen++
			default:
				return nil, fmt.Errorf("diff line %d: a hunk line must start with ' ', '-' or '+', got %q", i+1, clip(line))
			}
			if oldSeen > h.oldCount || newSeen > h.newCount {
				return nil, fmt.Errorf("diff line %d: hunk %q has more lines than its header counts", i+1, h.header)
			}
			h.lines = append(h.lines, diffLine{op: op, text: text + "\n"})
			i++
		}
		if oldSeen != h.oldCount || newSeen != h.newCount {
			return nil, fmt.Errorf("hunk %q is cut short: header counts %d old and %d new lines, body has %d and %d", h.header, h.oldCount, h.newCount, oldSeen, newSeen)
		}
		hunks = append(hunks, h)
	}
	return finishDiff(hunks)
}

func finishDiff(hunks []hunk) ([]hunk, error) {
	if len(hunks) == 0 {
		return nil, fmt.Errorf("diff has no hunks (no \"@@ -a,b +c,d @@\" line)")
	}
	return hunks, nil
}

func allBlank(lines []string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			return false
		}
	}
	return true
}

func parseHunkHeader(line string) (hunk, error) {
	h := hunk{header: line}
	bad := fmt.Errorf("malformed hunk header %q (want \"@@ -a,b +c,d @@\")", clip(line))
	rest, ok := strings.CutPrefix(line, "@@ -")
	if !ok {
		return h, bad
	}
	ranges, _, ok := strings.Cut(rest, " @@")
	if !ok {
		return h, bad
	}
	oldR, newR, ok := strings.Cut(ranges, " +")
	if !ok {
		return h, bad
	}
	var err1, err2 error
	h.oldStart, h.oldCount, err1 = parseRange(oldR)
	h.newStart, h.newCount, err2 = parseRange(newR)
	if err1 != nil || err2 != nil {
		return h, bad
	}
	if h.oldCount == 0 && h.newCount == 0 {
		return h, fmt.Errorf("empty hunk %q", clip(line))
	}
	if h.oldCount > 0 && h.oldStart == 0 {
		return h, fmt.Errorf("hunk %q: line numbers start at 1", clip(line))
	}
	return h, nil
}

// parseRange parses "start[,count]"; count defaults to 1.
func parseRange(s string) (start, count int, err error) {
	a, b, hasCount := strings.Cut(s, ",")
	if start, err = parseCount(a); err != nil {
		return 0, 0, err
	}
	count = 1
	if hasCount {
		if count, err = parseCount(b); err != nil {
			return 0, 0, err
		}
	}
	return start, count, nil
}

func parseCount(s string) (int, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxDiffCount {
		return 0, fmt.Errorf("not a line number: %q", s)
	}
	return n, nil
}

// applyDiff applies hunks, in order, to content. It fails, changing
// nothing, unless every hunk matches exactly where its header says.
func applyDiff(content string, hunks []hunk) (string, error) {
	lines := strings.SplitAfter(content, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	out := make([]string, 0, len(lines))
	pos := 0
	for n, h := range hunks {
		at := h.oldStart - 1
		if h.oldCount == 0 { // pure insertion: after line oldStart
			at = h.oldStart
		}
		if at < pos {
			return "", fmt.Errorf("hunk %d %q overlaps the hunk before it or is out of order", n+1, h.header)
		}
		if at > len(lines) {
			return "", fmt.Errorf("hunk %d %q starts past the end of the file (%d lines)", n+1, h.header, len(lines))
		}
		out = append(out, lines[pos:at]...)
		for _, l := range h.lines {
			if l.op == '+' {
				out = append(out, l.text)
				continue
			}
			if at >= len(lines) {
				return "", fmt.Errorf("hunk %d %q: the file ends at line %d, the hunk expects %q", n+1, h.header, len(lines), clip(l.text))
			}
			if lines[at] != l.text {
				return "", fmt.Errorf("hunk %d %q: line %d does not match: the diff expects %q, the file has %q", n+1, h.header, at+1, clip(l.text), clip(lines[at]))
			}
			if l.op == ' ' {
				out = append(out, l.text)
			}
			at++
		}
		pos = at
	}
	out = append(out, lines[pos:]...)
	for i, l := range out[:max(len(out)-1, 0)] {
		if !strings.HasSuffix(l, "\n") {
			return "", fmt.Errorf("the diff leaves line %d without a newline in the middle of the file", i+1)
		}
	}
	return strings.Join(out, ""), nil
}

// clip keeps error messages short when lines are long.
func clip(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
