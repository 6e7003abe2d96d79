package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseBudget reads a budget as a run's --budget gives it:
// cost=2,tokens=500000,calls=500,wall=30m (any of them, in any order).
func ParseBudget(spec string) (SessionBudget, error) {
	var b SessionBudget
	if strings.TrimSpace(spec) == "" {
		return b, fmt.Errorf("empty budget: want e.g. cost=2,calls=500")
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || v == "" {
			return b, fmt.Errorf("budget %q: want KEY=VALUE, got %q", spec, part)
		}
		if seen[k] {
			return b, fmt.Errorf("budget %q: %s is given twice", spec, k)
		}
		seen[k] = true
		var err error
		switch k {
		case "cost":
			b.Cost, err = strconv.ParseFloat(v, 64)
		case "tokens":
			b.Tokens, err = strconv.ParseInt(v, 10, 64)
		case "calls":
			b.Calls, err = strconv.Atoi(v)
		case "wall":
			b.Wall, err = time.ParseDuration(v)
		default:
			return b, fmt.Errorf("budget %q: %q is not cost, tokens, calls or wall", spec, k)
		}
		if err != nil {
			return b, fmt.Errorf("budget %q: %s=%s is not a number (or, for wall, a duration like 30m)", spec, k, v)
		}
	}
	if b.Cost < 0 || b.Tokens < 0 || b.Calls < 0 || b.Wall < 0 || b.Cost != b.Cost || b.Cost > 1e9 {
		return b, fmt.Errorf("budget %q: caps are positive numbers (0: no cap)", spec)
	}
	return b, nil
}

// String is the budget as ParseBudget reads it.
func (b SessionBudget) String() string {
	var parts []string
	if b.Cost > 0 {
		parts = append(parts, "cost="+strconv.FormatFloat(b.Cost, 'f', -1, 64))
	}
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("tokens=%d", b.Tokens))
	}
	if b.Calls > 0 {
		parts = append(parts, fmt.Sprintf("calls=%d", b.Calls))
	}
	if b.Wall > 0 {
		parts = append(parts, "wall="+b.Wall.String())
	}
	return strings.Join(parts, ",")
}
