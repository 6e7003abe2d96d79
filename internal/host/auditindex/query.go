package auditindex

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// SessionAgents returns the agents with entries in session, by name.
func (x *Index) SessionAgents(session string) ([]string, error) {
	db, done, err := x.reader()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := db.Query("SELECT DISTINCT agent FROM entries WHERE session = ? AND session != '' ORDER BY agent", session)
	if err != nil {
		return nil, err
	}
	var out []string
	err = scanAll(rows, func() error {
		var a string
		err := rows.Scan(&a)
		out = append(out, a)
		return err
	})
	return out, err
}

// Find runs q, oldest first (or newest first with q.Newest). A session
// that several agents' entries name must come with its agent
// (auditquery.ErrSessionAgents), and a parent matches only calls of its own agent.
func (x *Index) Find(q Query) ([]Hit, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	if q.Session != "" && q.Agent == "" && !q.AllAgents {
		agents, err := x.SessionAgents(q.Session)
		if err != nil {
			return nil, err
		}
		if err := q.OneAgent(agents); err != nil {
			return nil, err
		}
	}
	db, done, err := x.reader()
	if err != nil {
		return nil, err
	}
	defer done()
	sqlText, args := querySQL(&q)
	rows, err := db.Query(sqlText, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Hit
	for rows.Next() {
		var h Hit
		var line string
		if err := rows.Scan(&h.Seq, &line); err != nil {
			return nil, err
		}
		h.Entry, h.Line = new(gateway.Entry), []byte(line)
		if err := json.Unmarshal(h.Line, h.Entry); err != nil {
			return nil, fmt.Errorf("audit index: entry %d: %w", h.Seq, err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// querySQL is the statement of a checked query and its arguments: the
// matching seqs in order, then their lines.
func querySQL(q *Query) (string, []any) {
	var where []string
	var args []any
	eq := func(col, v string) {
		if v != "" {
			where = append(where, col+" = ?")
			args = append(args, v)
		}
	}
	eq("agent", q.Agent)
	eq("tool", q.Tool)
	eq("type", q.Type)
	eq("decision", q.Decision)
	eq("rule", q.Rule)
	// The session and parent indexes leave out the empty value; SQLite uses
	// such a partial index only when the query repeats its condition.
	eq("session", q.Session)
	if q.Session != "" {
		where = append(where, "session != ''")
	}
	eq("parent", q.Parent)
	if q.Parent != "" {
		// The calls a call caused are of its agent: a parent hint from
		// another agent's sandbox names it in vain. (A parent that is no
		// call here, a model's tool_use id, keeps every agent's.)
		where = append(where, "parent != ''",
			"(agent IN (SELECT agent FROM entries WHERE id = ?) OR NOT EXISTS (SELECT 1 FROM entries WHERE id = ?))")
		args = append(args, q.Parent, q.Parent)
	}
	eq("id", q.ID)
	eq("phase", q.Phase)
	if !q.Since.IsZero() {
		where = append(where, "ts >= ?")
		args = append(args, q.Since.UnixNano())
	}
	if !q.Until.IsZero() {
		where = append(where, "ts < ?")
		args = append(args, q.Until.UnixNano())
	}
	if terms := ftsTerms(q.Text); terms != "" {
		where = append(where, "seq IN (SELECT rowid FROM argtext WHERE argtext MATCH ?)")
		args = append(args, terms)
	}
	order := "ASC"
	if q.Newest {
		order = "DESC"
		if q.After > 0 {
			where = append(where, "seq < ?")
			args = append(args, q.After)
		}
	} else if q.After > 0 {
		where = append(where, "seq > ?")
		args = append(args, q.After)
	}
	sqlText := "SELECT seq FROM entries"
	if len(where) > 0 {
		sqlText += " WHERE " + strings.Join(where, " AND ")
	}
	sqlText += " ORDER BY seq " + order + " LIMIT ?"
	sqlText = "SELECT l.seq, l.line FROM (" + sqlText + ") AS m JOIN lines AS l ON l.seq = m.seq ORDER BY l.seq " + order
	args = append(args, q.Limit)
	return sqlText, args
}

// ftsTerms turns free text into an FTS5 query of quoted terms (all must
// match), so nothing the user types is read as query syntax.
func ftsTerms(text string) string {
	var terms []string
	for _, w := range strings.Fields(text) {
		terms = append(terms, `"`+strings.ReplaceAll(w, `"`, `""`)+`"`)
	}
	return strings.Join(terms, " ")
}

// Count is how many entries the index holds.
func (x *Index) Count() (int64, error) {
	db, done, err := x.reader()
	if err != nil {
		return 0, err
	}
	defer done()
	var n int64
	err = db.QueryRow("SELECT count(*) FROM entries").Scan(&n)
	return n, err
}
