package gatewaycmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/calltree"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
)

// sessionEntries returns every entry of a session (of agent alone when
// given), oldest first: from the running gateway's index, else from the
// index (or the log) here. Without an agent it asks for every agent's
// entries on purpose: the tree keeps each agent's apart.
func sessionEntries(cmd *cobra.Command, g *cli.Globals, session, agent string) ([]*gateway.Entry, error) {
	var out []*gateway.Entry
	q := auditindex.Query{Session: session, Agent: agent, AllAgents: agent == "", Limit: auditindex.MaxLimit}
	for {
		hits, err := cli.FindAudit(cmd, g, local{}, q)
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			out = append(out, h.Entry)
		}
		if len(hits) < q.Limit {
			return out, nil
		}
		q.After = hits[len(hits)-1].Seq
	}
}

type sessionCall = calltree.Call[*gateway.Entry]

// printSessionTree prints a session's calls as trees (calltree.Build): one
// per agent whose calls name the session, each call under the call that
// caused it, in the order they began.
func printSessionTree(w io.Writer, session string, entries []*gateway.Entry) {
	trees := calltree.Build(entries, func(e *gateway.Entry) *gateway.Entry { return e })
	if len(trees) > 1 {
		fmt.Fprintf(w, "calls of %d agents name session %s: a session is one agent's, so each agent's calls are a tree of their own\n",
			len(trees), textsafe.Line(session))
	}
	var walk func(cs []*sessionCall, depth int)
	walk = func(cs []*sessionCall, depth int) {
		for _, c := range cs {
			fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", depth+1), sessionLine(c))
			walk(c.Kids, depth+1)
		}
	}
	for _, t := range trees {
		fmt.Fprintf(w, "session %s of agent %s: %d calls, %d denied\n", textsafe.Line(session), textsafe.Line(cli.OrDash(t.Agent)), t.Calls, t.Denied)
		walk(t.Roots, 0)
	}
}

// sessionLine is one call in a line: when, whose, what it was, how it was
// decided, how it ended. What a request carried (tool names, arguments,
// reasons quoting them) is rendered by textsafe, so no call can draw a line
// of its own.
func sessionLine(c *sessionCall) string {
	e, r := c.First(), c.Last()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s %s", e.TS.Local().Format("15:04:05.000"), textsafe.Line(cli.OrDash(e.Agent)), e.Type,
		textsafe.Line(e.Tool), textsafe.Line(r.Decision))
	if r.Rule != "" && r.Decision != "allow" {
		fmt.Fprintf(&b, " [%s] %s", textsafe.Line(r.Rule), textsafe.Line(r.Reason))
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
			fmt.Fprintf(&b, " stop=%s", textsafe.Line(s))
		}
	}
	if r.DurationMs != nil {
		fmt.Fprintf(&b, " %.1fms", *r.DurationMs)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, " error=%q", r.Error)
	}
	fmt.Fprintf(&b, " (%s)", textsafe.Line(e.ID))
	return b.String()
}

// callSummary is the gist of a call's arguments, rendered safe: a command,
// a path, a model.
func callSummary(e *gateway.Entry) string {
	m := (&gateway.Call{Args: e.Args}).ArgsMap()
	for _, k := range []string{"command", "path", "model", "host"} {
		if s, ok := m[k].(string); ok && s != "" {
			line, _ := textsafe.Clip(s, 80)
			return line
		}
	}
	if argv, ok := m["argv"].([]any); ok {
		var parts []string
		for _, a := range argv {
			parts = append(parts, fmt.Sprint(a))
		}
		line, _ := textsafe.Clip(strings.Join(parts, " "), 80)
		return line
	}
	return ""
}
