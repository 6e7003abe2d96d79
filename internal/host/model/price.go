package model

import (
	"path"
	"strings"
)

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input      float64 `json:"input" yaml:"input"`
	Output     float64 `json:"output" yaml:"output"`
	CacheRead  float64 `json:"cacheRead" yaml:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite" yaml:"cacheWrite"`
}

// Cost is the price of u.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.Input)*p.Input + float64(u.Output)*p.Output +
		float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite) / 1e6
}

// Prices is a provider's price table: model name or pattern (path.Match
// syntax, e.g. "claude-sonnet-4*") → price.
type Prices map[string]Price

// Lookup finds the price of a model: an exact entry first, else the
// matching pattern with the longest text (the most specific). ok is false
// for a model the table does not price.
func (ps Prices) Lookup(m string) (Price, bool) {
	if p, ok := ps[m]; ok {
		return p, true
	}
	best, found := "", false
	for pat := range ps {
		if !strings.ContainsAny(pat, "*?[") {
			continue
		}
		if ok, _ := path.Match(pat, m); ok && (!found || len(pat) > len(best) || len(pat) == len(best) && pat < best) {
			best, found = pat, true
		}
	}
	if !found {
		return Price{}, false
	}
	return ps[best], true
}

// Allowed reports whether model m is on an allowlist of names and patterns
// (path.Match syntax); an empty list allows every model.
func Allowed(list []string, m string) bool {
	if len(list) == 0 {
		return true
	}
	for _, pat := range list {
		if pat == m {
			return true
		}
		if ok, _ := path.Match(pat, m); ok {
			return true
		}
	}
	return false
}
