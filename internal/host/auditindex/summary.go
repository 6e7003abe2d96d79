package auditindex

import "database/sql"

// AgentUsage sums one agent's entries for the dashboard.
type AgentUsage struct {
	Agent string
	// Calls and Denials count decisions (one per call).
	Calls, Denials int64
	// Model calls and their tokens and cost, from the model door's results.
	ModelCalls                int64
	InputTokens, OutputTokens int64
	CostUSD                   float64
	// Egress connections and the bytes they carried.
	Egress, EgressBytes int64
}

// Usage sums the log per agent, from its start.
func (x *Index) Usage() (map[string]*AgentUsage, error) {
	out := map[string]*AgentUsage{}
	get := func(agent string) *AgentUsage {
		if out[agent] == nil {
			out[agent] = &AgentUsage{Agent: agent}
		}
		return out[agent]
	}
	db, done, err := x.reader()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := db.Query(`SELECT agent, COUNT(*), SUM(decision = 'deny') FROM entries
		WHERE phase = 'decision' AND agent != '' GROUP BY agent`)
	if err != nil {
		return nil, err
	}
	if err := scanAll(rows, func() error {
		var a string
		var calls, denials int64
		if err := rows.Scan(&a, &calls, &denials); err != nil {
			return err
		}
		u := get(a)
		u.Calls, u.Denials = calls, denials
		return nil
	}); err != nil {
		return nil, err
	}
	// Tokens, cost and bytes are in the result entries' detail.
	rows, err = db.Query(`SELECT e.agent, e.type, COUNT(*),
		COALESCE(SUM(json_extract(l.line, '$.detail.inputTokens')), 0),
		COALESCE(SUM(json_extract(l.line, '$.detail.outputTokens')), 0),
		COALESCE(SUM(json_extract(l.line, '$.detail.costUSD')), 0),
		COALESCE(SUM(json_extract(l.line, '$.detail.bytesUp')), 0) + COALESCE(SUM(json_extract(l.line, '$.detail.bytesDown')), 0)
		FROM entries AS e JOIN lines AS l ON l.seq = e.seq
		WHERE e.phase = 'result' AND e.type IN ('model', 'egress') AND e.agent != '' GROUP BY e.agent, e.type`)
	if err != nil {
		return nil, err
	}
	err = scanAll(rows, func() error {
		var a, kind string
		var n, in, outTok, bytes int64
		var cost float64
		if err := rows.Scan(&a, &kind, &n, &in, &outTok, &cost, &bytes); err != nil {
			return err
		}
		u := get(a)
		if kind == "model" {
			u.ModelCalls, u.InputTokens, u.OutputTokens, u.CostUSD = n, in, outTok, cost
		} else {
			u.Egress, u.EgressBytes = n, bytes
		}
		return nil
	})
	return out, err
}

// RuleHits counts the decisions one rule made.
type RuleHits struct {
	Rule               string
	Allow, Deny, Other int64
	LastSeq            int64
}

// RuleHits counts, per rule, the decisions it made (refusals and asks
// included; results excluded), busiest first.
func (x *Index) RuleHits() ([]RuleHits, error) {
	db, done, err := x.reader()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := db.Query(`SELECT rule, SUM(decision = 'allow'), SUM(decision = 'deny'),
		SUM(decision NOT IN ('allow', 'deny')), MAX(seq)
		FROM entries WHERE phase != 'result' AND rule != '' GROUP BY rule ORDER BY COUNT(*) DESC, rule`)
	if err != nil {
		return nil, err
	}
	var out []RuleHits
	err = scanAll(rows, func() error {
		var h RuleHits
		if err := rows.Scan(&h.Rule, &h.Allow, &h.Deny, &h.Other, &h.LastSeq); err != nil {
			return err
		}
		out = append(out, h)
		return nil
	})
	return out, err
}

func scanAll(rows *sql.Rows, each func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := each(); err != nil {
			return err
		}
	}
	return rows.Err()
}
