package modeldoor

import (
	"cmp"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// UsageRow is one model's use by an agent over a window, from the audit
// log's model entries.
type UsageRow struct {
	Agent      string  `json:"agent"`
	Provider   string  `json:"provider"`
	Model      string  `json:"model"`
	Calls      int     `json:"calls"`  // forwarded (result entries)
	Denied     int     `json:"denied"` // refused before anything was sent
	Errors     int     `json:"errors"` // forwarded, but failed or cut
	Input      int64   `json:"inputTokens"`
	Output     int64   `json:"outputTokens"`
	CacheRead  int64   `json:"cacheReadTokens"`
	CacheWrite int64   `json:"cacheWriteTokens"`
	CostUSD    float64 `json:"costUSD"`
	Unpriced   int     `json:"unpriced,omitempty"` // calls whose model has no price
	// Estimated are the tokens (and cost) charged for answers whose usage
	// never arrived whole (usage: estimated), apart from the measured ones.
	Estimated        int64   `json:"estimatedTokens,omitempty"`
	EstimatedCostUSD float64 `json:"estimatedCostUSD,omitempty"`
}

// Usage sums the model calls in the audit log at dir since a time (zero:
// all), for one agent or all (""), by agent, provider and model. There is
// no index: it reads the log, rotated files included.
func Usage(dir, agent string, since time.Time) ([]UsageRow, error) {
	rows := map[[3]string]*UsageRow{}
	row := func(e *gateway.Entry, model string) *UsageRow {
		k := [3]string{e.Agent, e.Tool, model}
		r := rows[k]
		if r == nil {
			r = &UsageRow{Agent: e.Agent, Provider: e.Tool, Model: model}
			rows[k] = r
		}
		return r
	}
	err := audit.Query(dir, audit.Filter{Agent: agent, Type: string(gateway.KindModel), Since: since}, func(e *gateway.Entry) error {
		name, _ := e.Detail["model"].(string)
		switch {
		case e.Phase == gateway.PhaseDecision && e.Decision == "deny":
			row(e, name).Denied++
		case e.Phase == gateway.PhaseResult:
			r := row(e, name)
			r.Calls++
			if e.Error != "" {
				r.Errors++
			}
			r.Input += count(e.Detail["inputTokens"])
			r.Output += count(e.Detail["outputTokens"])
			r.CacheRead += count(e.Detail["cacheReadTokens"])
			r.CacheWrite += count(e.Detail["cacheWriteTokens"])
			r.Estimated += count(e.Detail["estimatedTokens"])
			if c, ok := e.Detail["costUSD"].(float64); ok && c > 0 {
				r.CostUSD += c
			}
			if c, ok := e.Detail["estimatedCostUSD"].(float64); ok && c > 0 {
				r.EstimatedCostUSD += c
			}
			if e.Detail["unpriced"] == true {
				r.Unpriced++
			}
		}
		return nil
	})
	out := make([]UsageRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b UsageRow) int {
		return cmp.Or(cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Model, b.Model))
	})
	return out, err
}

func count(v any) int64 {
	f, ok := v.(float64)
	if !ok || f < 0 {
		return 0
	}
	return int64(f)
}
