package gatewaycmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/auditindex"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/textsafe"
)

// sessionEntries returns every entry of a session, oldest first: from the
// running gateway's index, else from the index (or the log) here.
func sessionEntries(cmd *cobra.Command, g *cli.Globals, session string) ([]*gateway.Entry, error) {
	var out []*gateway.Entry
	q := auditindex.Query{Session: session, Limit: auditindex.MaxLimit}
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

// sessionCall is one call of a session: its entries and what it caused.
type sessionCall struct {
	first    *gateway.Entry // its first entry (decision, ask or observation)
	last     *gateway.Entry // its last (the result, when it has one)
	children []*sessionCall
}

// printSessionTree prints a session's calls as a tree: a call under the
// call that caused it — by parent, a call id (the run's exec for what its
// process tree did) or a tool_use id that a model call's answer listed
// (detail.toolUseIds) — in the order they began.
func printSessionTree(w io.Writer, session string, entries []*gateway.Entry) {
	calls := map[string]*sessionCall{}
	var order []*sessionCall
	toolUse := map[string]*sessionCall{} // tool_use id → the model call that emitted it
	for _, e := range entries {
		c := calls[e.ID]
		if c == nil {
			c = &sessionCall{first: e}
			calls[e.ID] = c
			order = append(order, c)
		}
		c.last = e
		if ids, ok := e.Detail["toolUseIds"].([]any); ok {
			for _, id := range ids {
				if s, ok := id.(string); ok {
					toolUse[s] = c
				}
			}
		}
	}
	var roots []*sessionCall
	for _, c := range order {
		p := c.first.Parent
		parent := calls[p]
		if parent == nil {
			parent = toolUse[p]
		}
		if parent == nil || parent == c {
			roots = append(roots, c)
			continue
		}
		parent.children = append(parent.children, c)
	}
	denied := 0
	for _, c := range order {
		if c.last.Decision == "deny" {
			denied++
		}
	}
	fmt.Fprintf(w, "session %s: %d calls, %d denied\n", textsafe.Line(session), len(order), denied)
	var walk func(cs []*sessionCall, depth int)
	walk = func(cs []*sessionCall, depth int) {
		for _, c := range cs {
			fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", depth+1), sessionLine(c))
			walk(c.children, depth+1)
		}
	}
	walk(roots, 0)
}

// sessionLine is one call in a line: what it was, how it was decided, how
// it ended. What a request carried (tool names, arguments, reasons quoting
// them) is rendered by textsafe, so no call can draw a line of its own.
func sessionLine(c *sessionCall) string {
	e, r := c.first, c.last
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s", e.TS.Local().Format("15:04:05.000"), e.Type, textsafe.Line(e.Tool), textsafe.Line(r.Decision))
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
