package auditindex

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/gateway"
)

// MaxLimit bounds one page of results.
const MaxLimit = 10_000

// Query selects entries; empty fields match anything.
type Query struct {
	Agent, Tool, Type, Decision, Rule, Session, Parent, ID, Phase string
	Since, Until                                                  time.Time
	// Text searches the arguments: words (all must appear), as full-text
	// terms, never as SQL.
	Text string
	// Limit (default 100, at most MaxLimit) and After, the seq of the last
	// entry of the previous page (0: from the start; newest first: from the end).
	Limit int
	After int64
	// Newest lists from the end of the log backwards.
	Newest bool
}

// Hit is one entry found, with its place in the chain.
type Hit struct {
	Seq   int64          `json:"seq"`
	Entry *gateway.Entry `json:"entry"`
	// Line is the entry as written in the log, for checking its hash.
	Line []byte `json:"-"`
}

// ErrBadQuery is a query the index refuses (a limit out of range, a time
// window that ends before it starts).
var ErrBadQuery = errors.New("bad query")

// Check refuses a query out of range and fills in the default limit; the
// fleet store (auditpg) takes the same queries.
func (q *Query) Check() error {
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 0 || q.Limit > MaxLimit {
		return fmt.Errorf("%w: limit %d is not between 1 and %d", ErrBadQuery, q.Limit, MaxLimit)
	}
	if q.After < 0 {
		return fmt.Errorf("%w: after %d is negative", ErrBadQuery, q.After)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return fmt.Errorf("%w: until is before since", ErrBadQuery)
	}
	// A misspelt value would match nothing, which reads as "there were
	// none": a query for denials must not come back empty for a typo.
	for _, f := range []struct {
		name, v string
		known   []string
	}{
		{"type", q.Type, kindNames},
		{"decision", q.Decision, gateway.Verdicts},
		{"phase", q.Phase, gateway.Phases},
	} {
		if f.v != "" && !slices.Contains(f.known, f.v) {
			return fmt.Errorf("%w: no entry has %s %q (there are: %s)", ErrBadQuery, f.name, f.v, strings.Join(f.known, ", "))
		}
	}
	return nil
}

var kindNames = func() []string {
	var names []string
	for _, k := range gateway.Kinds {
		names = append(names, string(k))
	}
	return names
}()

// ErrSessionAgents is a query for a session that entries of several agents
// name, naming none of them. A session is one agent's: the session a call
// carries is a hint from its sandbox, and another agent's sandbox can name
// the same one, so which agent's session is meant must be said.
var ErrSessionAgents = fmt.Errorf("%w: a session is one agent's", ErrBadQuery)

// OneAgent refuses q when it asks for a session without an agent and
// agents, those with entries in that session, are more than one.
func (q *Query) OneAgent(agents []string) error {
	if q.Session == "" || q.Agent != "" || len(agents) < 2 {
		return nil
	}
	return fmt.Errorf("%w: session %s has entries of %d agents (%s); name one", ErrSessionAgents, q.Session, len(agents),
		strings.Join(agents, ", "))
}

// SessionAgents returns the agents with entries in session, by name.
func (x *Index) SessionAgents(session string) ([]string, error) {
	rows, err := x.db.Query("SELECT DISTINCT agent FROM entries WHERE session = ? AND session != '' ORDER BY agent", session)
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
// (ErrSessionAgents), and a parent matches only calls of its own agent.
func (x *Index) Find(q Query) ([]Hit, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	if q.Session != "" && q.Agent == "" {
		agents, err := x.SessionAgents(q.Session)
		if err != nil {
			return nil, err
		}
		if err := q.OneAgent(agents); err != nil {
			return nil, err
		}
	}
	sqlText, args := q.sql()
	rows, err := x.db.Query(sqlText, args...)
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

// sql is the statement of a checked query and its arguments: the
// matching seqs in order, then their lines.
func (q *Query) sql() (string, []any) {
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
	var n int64
	err := x.db.QueryRow("SELECT count(*) FROM entries").Scan(&n)
	return n, err
}
