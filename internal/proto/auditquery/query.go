// Package auditquery is a question to the audit log and its answer, as every
// place that answers one takes them: the index beside the log
// (auditindex), the fleet database (auditpg), and the admin API, whose
// client is the light CLI, toolgate-cli. A leaf: it imports nothing of ours
// but gateway, so the CLI can ask without linking SQLite or pgx.
package auditquery

import (
	"errors"
	"fmt"
	"github.com/toolgate/toolgate/internal/proto/api"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
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
	// AllAgents asks for a session's entries of every agent that names it,
	// for a reader that keeps each agent's apart (calltree); without it
	// such a session must come with its agent (OneAgent).
	AllAgents bool
}

// Hit is one entry found, with its place in the chain.
type Hit struct {
	Seq   int64      `json:"seq"`
	Entry *api.Entry `json:"entry"`
	// Line is the entry as written in the log, for checking its hash.
	Line []byte `json:"-"`
}

// ErrSessionAgents is a query for a session that entries of several agents
// name, naming none of them. A session is one agent's: the session a call
// carries is a hint from its sandbox, and another agent's sandbox can name
// the same one, so which agent's session is meant must be said.
var ErrSessionAgents = fmt.Errorf("%w: a session is one agent's", ErrBadQuery)

// OneAgent refuses q when it asks for a session without an agent and
// agents, those with entries in that session, are more than one.
func (q *Query) OneAgent(agents []string) error {
	if q.Session == "" || q.Agent != "" || q.AllAgents || len(agents) < 2 {
		return nil
	}
	return fmt.Errorf("%w: session %s has entries of %d agents (%s); name one", ErrSessionAgents, q.Session, len(agents),
		strings.Join(agents, ", "))
}

// ErrBadQuery is a query refused (a limit out of range, a time window that
// ends before it starts, a value no entry can have).
var ErrBadQuery = errors.New("bad query")

// Check refuses a query out of range and fills in the default limit.
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
		{"decision", q.Decision, api.Verdicts},
		{"phase", q.Phase, api.Phases},
	} {
		if f.v != "" && !slices.Contains(f.known, f.v) {
			return fmt.Errorf("%w: no entry has %s %q (there are: %s)", ErrBadQuery, f.name, f.v, strings.Join(f.known, ", "))
		}
	}
	return nil
}

var kindNames = func() []string {
	var names []string
	for _, k := range api.Kinds {
		names = append(names, string(k))
	}
	return names
}()

// The query's fields as URL parameters (the admin API's GET
// /v1/audit/entries): one name each, empty ones left out.
func (q *Query) fields() []struct {
	name string
	v    *string
} {
	return []struct {
		name string
		v    *string
	}{
		{"agent", &q.Agent}, {"tool", &q.Tool}, {"type", &q.Type}, {"decision", &q.Decision},
		{"rule", &q.Rule}, {"session", &q.Session}, {"parent", &q.Parent}, {"id", &q.ID},
		{"phase", &q.Phase}, {"text", &q.Text},
	}
}

// Values encodes q as URL parameters; Parse reads them back.
func (q Query) Values() url.Values {
	v := url.Values{}
	for _, f := range q.fields() {
		if *f.v != "" {
			v.Set(f.name, *f.v)
		}
	}
	for name, t := range map[string]time.Time{"since": q.Since, "until": q.Until} {
		if !t.IsZero() {
			v.Set(name, t.Format(time.RFC3339Nano))
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.After != 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Newest {
		v.Set("newest", "true")
	}
	if q.AllAgents {
		v.Set("all_agents", "true")
	}
	return v
}

// Parse reads a query from URL parameters and checks it. An unknown or
// repeated parameter, or a value that does not parse, is an ErrBadQuery
// naming it: a query must not quietly answer something broader than asked.
func Parse(v url.Values) (Query, error) {
	var q Query
	strs := map[string]*string{}
	for _, f := range q.fields() {
		strs[f.name] = f.v
	}
	for name, vals := range v {
		if len(vals) != 1 {
			return q, fmt.Errorf("%w: %s given %d times", ErrBadQuery, name, len(vals))
		}
		val := vals[0]
		var err error
		switch name {
		case "since":
			q.Since, err = time.Parse(time.RFC3339Nano, val)
		case "until":
			q.Until, err = time.Parse(time.RFC3339Nano, val)
		case "limit":
			q.Limit, err = strconv.Atoi(val)
		case "after":
			q.After, err = strconv.ParseInt(val, 10, 64)
		case "newest":
			q.Newest, err = strconv.ParseBool(val)
		case "all_agents":
			q.AllAgents, err = strconv.ParseBool(val)
		default:
			s, ok := strs[name]
			if !ok {
				return q, fmt.Errorf("%w: no parameter %q", ErrBadQuery, name)
			}
			*s = val
		}
		if err != nil {
			return q, fmt.Errorf("%w: %s: %v", ErrBadQuery, name, err)
		}
	}
	return q, q.Check()
}
