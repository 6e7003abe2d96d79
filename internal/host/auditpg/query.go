package auditpg

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Hit is one entry found in the fleet: its gateway, its place in that
// gateway's chain, and N, its arrival order across the fleet (the page key).
type Hit struct {
	N       int64          `json:"n"`
	Gateway string         `json:"gateway"`
	Seq     int64          `json:"seq"`
	Entry   *gateway.Entry `json:"entry"`
}

// Find runs q over every gateway's entries, in arrival order (newest first
// with q.Newest); q.After is the N of the last hit of the previous page.
// Every value reaches Postgres as a parameter, never as SQL text.
func (s *Store) Find(ctx context.Context, q auditindex.Query) ([]Hit, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	if q.Session != "" && q.Agent == "" && !q.AllAgents {
		agents, err := s.sessionAgents(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		if err := q.OneAgent(agents); err != nil {
			return nil, err
		}
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	for _, f := range []struct{ col, v string }{
		{"agent", q.Agent}, {"tool", q.Tool}, {"type", q.Type}, {"decision", q.Decision}, {"rule", q.Rule},
		{"session", q.Session}, {"parent", q.Parent}, {"id", q.ID}, {"phase", q.Phase},
	} {
		if f.v != "" {
			where = append(where, f.col+" = "+arg(f.v))
		}
	}
	if q.Parent != "" { // the calls a call caused are of its agent (auditindex.Index.Find)
		p := arg(q.Parent)
		where = append(where, "(agent IN (SELECT agent FROM toolgate_audit_entries WHERE id = "+p+
			") OR NOT EXISTS (SELECT 1 FROM toolgate_audit_entries WHERE id = "+p+"))")
	}
	if !q.Since.IsZero() {
		where = append(where, "ts >= "+arg(q.Since))
	}
	if !q.Until.IsZero() {
		where = append(where, "ts < "+arg(q.Until))
	}
	for _, w := range strings.Fields(q.Text) {
		where = append(where, "args ILIKE "+arg("%"+likeEscape(w)+"%"))
	}
	order := "ASC"
	if q.Newest {
		order = "DESC"
		if q.After > 0 {
			where = append(where, "n < "+arg(q.After))
		}
	} else if q.After > 0 {
		where = append(where, "n > "+arg(q.After))
	}
	text := "SELECT n, gateway_id, seq, line FROM toolgate_audit_entries"
	if len(where) > 0 {
		text += " WHERE " + strings.Join(where, " AND ")
	}
	text += " ORDER BY n " + order + " LIMIT " + arg(q.Limit)
	rows, err := s.pool.Query(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Hit
	for rows.Next() {
		var h Hit
		var line string
		if err := rows.Scan(&h.N, &h.Gateway, &h.Seq, &line); err != nil {
			return nil, err
		}
		h.Entry = new(gateway.Entry)
		if err := json.Unmarshal([]byte(line), h.Entry); err != nil {
			return nil, fmt.Errorf("audit postgres: gateway %s entry %d: %w", h.Gateway, h.Seq, err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// sessionAgents returns the agents with entries in session, by name.
func (s *Store) sessionAgents(ctx context.Context, session string) ([]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT DISTINCT agent FROM toolgate_audit_entries WHERE session = $1 AND session <> '' ORDER BY agent", session)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// likeEscape makes a word match itself under ILIKE (escape character \).
func likeEscape(w string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(w)
}

// Lines returns gateway's lines as written, in chain order: a chain
// verifies from them as from the files.
func (s *Store) Lines(ctx context.Context, gatewayID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT line FROM toolgate_audit_entries WHERE gateway_id = $1 ORDER BY seq", gatewayID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
