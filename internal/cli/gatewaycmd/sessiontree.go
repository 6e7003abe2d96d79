package gatewaycmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auditindex"
	"github.com/toolgate/toolgate/internal/calltree"
	"github.com/toolgate/toolgate/internal/gateway"
)

// sessionEntries returns every entry of a session (of agent alone when
// given), oldest first: from the index, or by reading the log when there is
// none.
func sessionEntries(dir, session, agent string) ([]*gateway.Entry, error) {
	var out []*gateway.Entry
	x, err := openIndex(dir)
	if err != nil {
		err = audit.Query(dir, audit.Filter{Agent: agent}, func(e *gateway.Entry) error {
			if e.Session == session {
				out = append(out, e)
			}
			return nil
		})
		return out, err
	}
	defer x.Close()
	agents := []string{agent}
	if agent == "" {
		// A session is one agent's: each agent's part is asked for apart.
		if agents, err = x.SessionAgents(session); err != nil {
			return nil, err
		}
	}
	for _, a := range agents {
		q := auditindex.Query{Session: session, Agent: a, Limit: auditindex.MaxLimit}
		for {
			hits, err := x.Find(q)
			if err != nil {
				return nil, err
			}
			for _, h := range hits {
				out = append(out, h.Entry)
			}
			if len(hits) < q.Limit {
				break
			}
			q.After = hits[len(hits)-1].Seq
		}
	}
	return out, nil
}

type sessionCall = calltree.Call[*gateway.Entry]

// printSessionTree prints a session's calls as trees (calltree.Build): one
// per agent whose calls name the session, each call under the call that
// caused it, in the order they began.
func printSessionTree(w io.Writer, session string, entries []*gateway.Entry) {
	trees := calltree.Build(entries, func(e *gateway.Entry) *gateway.Entry { return e })
	if len(trees) > 1 {
		fmt.Fprintf(w, "calls of %d agents name session %s: a session is one agent's, so each agent's calls are a tree of their own\n",
			len(trees), session)
	}
	var walk func(cs []*sessionCall, depth int)
	walk = func(cs []*sessionCall, depth int) {
		for _, c := range cs {
			fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", depth+1), sessionLine(c))
			walk(c.Kids, depth+1)
		}
	}
	for _, t := range trees {
		fmt.Fprintf(w, "session %s of agent %s: %d calls, %d denied\n", session, orDash(t.Agent), t.Calls, t.Denied)
		walk(t.Roots, 0)
	}
}

// sessionLine is one call in a line: when, whose, what it was, how it was
// decided, how it ended.
func sessionLine(c *sessionCall) string {
	e, r := c.First(), c.Last()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s %s", e.TS.Local().Format("15:04:05.000"), orDash(e.Agent), e.Type, e.Tool, r.Decision)
	if r.Rule != "" && r.Decision != "allow" {
		fmt.Fprintf(&b, " [%s] %s", r.Rule, r.Reason)
	}
	if what := callSummary(e); what != "" {
		fmt.Fprintf(&b, " %s", what)
	}
	if r.ExitCode != nil {
		fmt.Fprintf(&b, " exit=%d", *r.ExitCode)
	}
	if r.Type == gateway.KindModel && r.Phase == gateway.PhaseResult {
		if in, ok := r.Detail["inputTokens"].(float64); ok {
			out, _ := r.Detail["outputTokens"].(float64)
			fmt.Fprintf(&b, " tokens=%d/%d", int64(in), int64(out))
		}
		if s, ok := r.Detail["stopReason"].(string); ok {
			fmt.Fprintf(&b, " stop=%s", s)
		}
	}
	if r.DurationMs != nil {
		fmt.Fprintf(&b, " %.1fms", *r.DurationMs)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, " error=%q", r.Error)
	}
	fmt.Fprintf(&b, " (%s)", e.ID)
	return b.String()
}

// callSummary is the gist of a call's arguments: a command, a path, a model.
func callSummary(e *gateway.Entry) string {
	m := (&gateway.Call{Args: e.Args}).ArgsMap()
	for _, k := range []string{"command", "path", "model", "host"} {
		if s, ok := m[k].(string); ok && s != "" {
			return clipText(s, 80)
		}
	}
	if argv, ok := m["argv"].([]any); ok {
		var parts []string
		for _, a := range argv {
			parts = append(parts, fmt.Sprint(a))
		}
		return clipText(strings.Join(parts, " "), 80)
	}
	return ""
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
