package netrule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Rule is one allowlist entry: an exact host, or "*.suffix" meaning strict
// subdomains of suffix (the apex needs its own rule), always with a port.
type Rule struct {
	Host     string // normalised exact host, or the suffix for a wildcard
	Wildcard bool
	Port     uint16
}

// String renders the rule in its canonical configuration form.
func (r Rule) String() string {
	h := r.Host
	if r.Wildcard {
		h = "*." + h
	} else if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(int(r.Port))
}

// Match reports whether a normalised target falls under the rule.
func (r Rule) Match(t Target) bool {
	if t.Port != r.Port {
		return false
	}
	if !r.Wildcard {
		return t.Host == r.Host
	}
	return !t.IsIP() && strings.HasSuffix(t.Host, "."+r.Host)
}

// ParseRule parses "host:port" or "*.suffix:port". Errors name the rule and
// say what is wrong, for `toolgate config check` to print as they are.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("egress rule %q: %w", s, err)
	}
	return r, nil
}

func parseRule(s string) (Rule, error) {
	host, port, err := splitHostPort(s)
	if err != nil {
		return Rule{}, err
	}
	wild := false
	switch {
	case host == "*":
		return Rule{}, errors.New("bare * would allow every host")
	case strings.HasPrefix(host, "*."):
		wild, host = true, host[2:]
	}
	if strings.Contains(host, "*") {
		return Rule{}, errors.New(`a wildcard is only allowed as a leading "*."`)
	}
	if wild && strings.Contains(host, ":") {
		return Rule{}, errors.New("wildcard over an IP address")
	}
	t, err := parseHost(host)
	if err != nil {
		return Rule{}, err
	}
	if wild {
		if t.IsIP() {
			return Rule{}, errors.New("wildcard over an IP address")
		}
		if !strings.Contains(t.Host, ".") {
			return Rule{}, fmt.Errorf("wildcard over the single-label suffix %q", t.Host)
		}
	}
	return Rule{Host: t.Host, Wildcard: wild, Port: port}, nil
}

// ParseRules parses a whole allowlist, reporting every bad entry at once.
func ParseRules(ss []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(ss))
	var errs []error
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rules = append(rules, r)
	}
	return rules, errors.Join(errs...)
}
