package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/calltree"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/session"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// feedPage is how many entries the feed and the denials list show.
const feedPage = 100

// maxSession bounds the entries of one session tree.
const maxSession = 5000

var errNoIndex = errors.New("the audit index is unavailable (see the gateway's log); `toolgate audit` still reads the files")

type agentRow struct {
	api.AgentStatus
	Usage *auditindex.AgentUsage
}

func (d *Dashboard) agents(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	var errs []string
	st, err := d.opts.Agents(r.Context())
	if err != nil {
		errs = append(errs, "sandboxes: "+err.Error())
	}
	usage := map[string]*auditindex.AgentUsage{}
	if d.opts.Index == nil {
		errs = append(errs, errNoIndex.Error())
	} else if usage, err = d.opts.Index.Usage(); err != nil {
		errs = append(errs, "audit index: "+err.Error())
	}
	var rows []agentRow
	for _, s := range st {
		u := usage[s.Agent]
		if u == nil {
			u = &auditindex.AgentUsage{Agent: s.Agent}
		}
		rows = append(rows, agentRow{AgentStatus: s, Usage: u})
	}
	data["Rows"], data["Errors"] = rows, errs
	d.render(w, r, "agents", data)
}

// filter is the feed's query from the URL: the same keys as `audit query`.
func filter(r *http.Request) auditindex.Query {
	q := r.URL.Query()
	return auditindex.Query{Agent: q.Get("agent"), Tool: q.Get("tool"), Type: q.Get("type"),
		Decision: q.Get("decision"), Rule: q.Get("rule"), Session: q.Get("session"), Text: q.Get("text")}
}

// row is one entry as the feed shows it: what a request carried rendered
// safe (textsafe), but for the ID and Session the links are made of.
type row struct {
	Seq      int64   `json:"seq"`
	TS       string  `json:"ts"`
	ID       string  `json:"id"`
	Phase    string  `json:"phase"`
	Agent    string  `json:"agent"`
	Type     string  `json:"type"`
	Tool     string  `json:"tool"`
	Via      string  `json:"via"`
	Decision string  `json:"decision"`
	Rule     string  `json:"rule"`
	Reason   string  `json:"reason"`
	Session  string  `json:"session"`
	Shown    string  `json:"sessionShown"` // the session's start, rendered safe
	Ms       float64 `json:"ms"`
	// Labels are what an allowed call gave its session (session.labels).
	Labels []string `json:"labels,omitempty"`
}

func rowOf(h auditindex.Hit) row {
	e := h.Entry
	r := row{Seq: h.Seq, TS: ago(e.TS), ID: e.ID, Phase: e.Phase, Agent: textsafe.Line(e.Agent), Type: string(e.Type), Tool: textsafe.Line(e.Tool),
		Via: textsafe.Line(e.Via), Decision: textsafe.Line(e.Decision), Rule: textsafe.Line(e.Rule), Reason: textsafe.Line(e.Reason),
		Session: e.Session, Shown: short(e.Session)}
	if e.DurationMs != nil {
		r.Ms = *e.DurationMs
	}
	r.Labels, _ = givenLabels(e)
	return r
}

// givenLabels are the labels an entry's call gave its session
// (session.Given), rendered safe, and where they came from.
func givenLabels(e *gateway.Entry) ([]string, string) {
	labels, target := session.Given(e)
	for i, l := range labels {
		labels[i] = textsafe.Line(l)
	}
	return labels, textsafe.Line(target)
}

// labelRow is where a session's label came from: its first giver.
type labelRow struct {
	Label, ID, Tool, Target, TS string
}

// sessionLabels lists each label the hits gave, with the call that gave it first.
func sessionLabels(hits []auditindex.Hit) []labelRow {
	var out []labelRow
	seen := map[string]bool{}
	for _, h := range hits {
		labels, target := givenLabels(h.Entry)
		for _, l := range labels {
			if seen[l] {
				continue
			}
			seen[l] = true
			out = append(out, labelRow{Label: l, ID: h.Entry.ID, Tool: textsafe.Line(h.Entry.Tool), Target: target,
				TS: h.Entry.TS.UTC().Format(time.TimeOnly)})
		}
	}
	return out
}

func (d *Dashboard) feed(w http.ResponseWriter, r *http.Request) {
	q := filter(r)
	data := map[string]any{"Q": q}
	if d.opts.Index == nil {
		data["Error"] = errNoIndex.Error()
		d.render(w, r, "feed", data)
		return
	}
	q.Newest, q.Limit = true, feedPage
	if before, err := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64); err == nil && before > 0 {
		q.After = before
	}
	hits, err := d.opts.Index.Find(q)
	if err != nil {
		data["Error"] = err.Error()
	}
	var rows []row
	var last int64
	for _, h := range hits {
		rows = append(rows, rowOf(h))
	}
	if len(hits) > 0 {
		last = hits[0].Seq
		if len(hits) == feedPage {
			data["Older"] = hits[len(hits)-1].Seq
		}
	}
	if q.After > 0 {
		data["Paged"] = true // an older page does not follow
	}
	data["Rows"], data["Last"], data["Query"] = rows, last, r.URL.Query()
	d.render(w, r, "feed", data)
}

// events streams the entries the filter matches as they are indexed
// (server-sent events; the id is the entry's seq, so a reconnecting
// browser resumes where it was).
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) {
	if d.opts.Index == nil {
		http.Error(w, errNoIndex.Error(), http.StatusServiceUnavailable)
		return
	}
	q := filter(r)
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	q.After, _ = strconv.ParseInt(after, 10, 64)
	if q.After < 0 {
		q.After = 0
	}
	q.Limit = 500
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	fmt.Fprint(w, "retry: 1000\n\n")
	_ = rc.Flush()
	tick := time.NewTicker(d.opts.Poll)
	defer tick.Stop()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		hits, err := d.opts.Index.Find(q)
		if err != nil {
			fmt.Fprintf(w, "event: problem\ndata: %q\n\n", err.Error())
		}
		for _, h := range hits {
			b, _ := json.Marshal(rowOf(h))
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", h.Seq, textsafe.JSON(b)) // the session's raw bytes as \u escapes
			q.After = h.Seq
		}
		if len(hits) > 0 || err != nil {
			if rc.Flush() != nil {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-d.done:
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			if rc.Flush() != nil {
				return
			}
		case <-tick.C:
		}
	}
}

// node is one call of a session tree: its entries (decision, result) and
// the calls it caused.
type node struct {
	ID      string
	Entries []row
	Kids    []*node
}

// agentTree is one agent's calls in a session (calltree.Tree).
type agentTree struct {
	Agent         string
	Roots         []*node
	Calls, Denied int
}

func (d *Dashboard) session(w http.ResponseWriter, r *http.Request) {
	id, agent := r.PathValue("id"), r.URL.Query().Get("agent")
	data := map[string]any{"Session": id, "Agent": agent, "Max": maxSession}
	if d.opts.Index == nil {
		data["Error"] = errNoIndex.Error()
		d.render(w, r, "session", data)
		return
	}
	// A session is one agent's: each agent's part is asked for apart.
	agents := []string{agent}
	var err error
	if agent == "" {
		agents, err = d.opts.Index.SessionAgents(id)
	}
	var hits []auditindex.Hit
	var labels []agentLabels
	truncated := false
	for _, a := range agents {
		if err != nil {
			break
		}
		var h []auditindex.Hit
		h, err = d.opts.Index.Find(auditindex.Query{Session: id, Agent: a, Limit: maxSession})
		hits, truncated = append(hits, h...), truncated || len(h) == maxSession
		if l := sessionLabels(h); len(l) > 0 {
			labels = append(labels, agentLabels{Agent: a, Labels: l})
		}
	}
	data["Labels"] = labels
	if err != nil {
		data["Error"] = err.Error()
	}
	data["Trees"], data["Count"], data["Truncated"] = trees(hits), len(hits), truncated
	d.render(w, r, "session", data)
}

type agentLabels struct {
	Agent  string
	Labels []labelRow
}

// trees is a session's calls as calltree draws them: one tree per agent,
// each call under the call that caused it.
func trees(hits []auditindex.Hit) []agentTree {
	var out []agentTree
	for _, t := range calltree.Build(hits, func(h auditindex.Hit) *gateway.Entry { return h.Entry }) {
		out = append(out, agentTree{Agent: t.Agent, Roots: nodes(t.Roots), Calls: t.Calls, Denied: t.Denied})
	}
	return out
}

func nodes(cs []*calltree.Call[auditindex.Hit]) []*node {
	out := make([]*node, len(cs))
	for i, c := range cs {
		n := &node{ID: c.First().ID, Kids: nodes(c.Kids)}
		for _, h := range c.Items {
			n.Entries = append(n.Entries, rowOf(h))
		}
		out[i] = n
	}
	return out
}

// checked is one entry of a call with its place in the chain.
type checked struct {
	Seq    int64
	Entry  *gateway.Entry
	JSON   string
	Hash   string // "" when the line hashes to what it claims, else the problem
	Link   string // likewise for the link to the line before it
	Prev   int64
	Parent string
	// Unlinked is a parent hint that names another agent's call: shown,
	// not linked (a session is one agent's; docs/security.md).
	Unlinked string
}

func (d *Dashboard) entry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	data := map[string]any{"ID": id}
	if d.opts.Index == nil {
		data["Error"] = errNoIndex.Error()
		d.render(w, r, "entry", data)
		return
	}
	hits, err := d.opts.Index.Find(auditindex.Query{ID: id, Limit: 100})
	if err != nil {
		data["Error"] = err.Error()
	}
	var out []checked
	for _, h := range hits {
		c := checked{Seq: h.Seq, Entry: h.Entry, Parent: h.Entry.Parent}
		if c.Parent != "" {
			if up, err := d.opts.Index.Find(auditindex.Query{ID: c.Parent, Limit: 1}); err == nil && len(up) > 0 && up[0].Entry.Agent != h.Entry.Agent {
				c.Parent, c.Unlinked = "", h.Entry.Parent
			}
		}
		b, _ := json.MarshalIndent(h.Entry, "", "  ")
		c.JSON = string(textsafe.JSON(b))
		if _, err := audit.CheckLine(h.Line); err != nil {
			c.Hash = err.Error()
		}
		prev, err := d.opts.Index.Find(auditindex.Query{After: h.Seq, Newest: true, Limit: 1})
		switch {
		case err != nil:
			c.Link = err.Error()
		case len(prev) == 0:
			c.Link = "" // the first entry the index holds
		case prev[0].Entry.Hash != h.Entry.Prev:
			c.Link = fmt.Sprintf("prev %s is not the hash of entry %d", short(h.Entry.Prev), prev[0].Seq)
		default:
			c.Prev = prev[0].Seq
		}
		out = append(out, c)
	}
	data["Entries"] = out
	d.render(w, r, "entry", data)
}

func (d *Dashboard) denials(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	if d.opts.Index == nil {
		data["Error"] = errNoIndex.Error()
		d.render(w, r, "denials", data)
		return
	}
	hits, err := d.opts.Index.RuleHits()
	if err != nil {
		data["Error"] = err.Error()
	}
	var byRule []auditindex.RuleHits
	for _, h := range hits {
		if h.Deny > 0 {
			byRule = append(byRule, h)
		}
	}
	slices.SortStableFunc(byRule, func(a, b auditindex.RuleHits) int { return int(b.Deny - a.Deny) })
	last, err := d.opts.Index.Find(auditindex.Query{Decision: "deny", Newest: true, Limit: feedPage})
	if err != nil {
		data["Error"] = err.Error()
	}
	var rows []row
	for _, h := range last {
		rows = append(rows, rowOf(h))
	}
	data["ByRule"], data["Rows"] = byRule, rows
	d.render(w, r, "denials", data)
}

// ruleRow is one rule in force with what it decided.
type ruleRow struct {
	Agent, ID, Effect, Expr, Reason, Mode string
	Hits                                  auditindex.RuleHits
}

func (d *Dashboard) policy(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	hits := map[string]auditindex.RuleHits{}
	if d.opts.Index != nil {
		all, err := d.opts.Index.RuleHits()
		if err != nil {
			data["Error"] = err.Error()
		}
		for _, h := range all {
			hits[h.Rule] = h
		}
	}
	cfg := d.opts.Config()
	var rows []ruleRow
	names := make([]string, 0, len(cfg.Agents))
	for name := range cfg.Agents {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, rule := range cfg.Agents[name].Rules {
			rr := ruleRow{Agent: name, ID: rule.ID, Reason: rule.Reason, Mode: rule.Mode, Hits: hits[rule.ID]}
			switch {
			case rule.Deny != "":
				rr.Effect, rr.Expr = "deny", rule.Deny
			case rule.Allow != "":
				rr.Effect, rr.Expr = "allow", rule.Allow
			default:
				rr.Effect, rr.Expr = "ask", rule.Ask
			}
			rows = append(rows, rr)
		}
	}
	// Decisions by the gateway's own checks (core switches, allowlists,
	// tokens, limits) are not config rules: listed after them.
	var builtin []auditindex.RuleHits
	inConfig := map[string]bool{}
	for _, rr := range rows {
		inConfig[rr.ID] = true
	}
	for _, h := range hits {
		if !inConfig[h.Rule] {
			builtin = append(builtin, h)
		}
	}
	slices.SortFunc(builtin, func(a, b auditindex.RuleHits) int {
		return int((b.Allow + b.Deny + b.Other) - (a.Allow + a.Deny + a.Other))
	})
	data["Rules"], data["Builtin"] = rows, builtin
	d.render(w, r, "policy", data)
}

func (d *Dashboard) approvals(w http.ResponseWriter, r *http.Request) {
	var list []approval.Pending
	if d.opts.Approvals != nil {
		list = d.opts.Approvals.List()
	}
	d.render(w, r, "approvals", map[string]any{"Pending": list, "Done": r.URL.Query().Get("done")})
}

// answer is the one change the dashboard makes: an admin answering a
// waiting call, by a same-origin form carrying the session's form token.
func (d *Dashboard) answer(w http.ResponseWriter, r *http.Request) {
	t := tokenOf(r)
	if t.Scope != auth.ScopeAdmin {
		if d.opts.OnRefuse != nil {
			d.opts.OnRefuse(r, "token of scope "+string(t.Scope)+" is not accepted for this request (requires admin)")
		}
		http.Error(w, "forbidden: answering an approval takes the admin token", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if !sameOrigin(r) || r.PostFormValue("csrf") != d.csrf(t) {
		if d.opts.OnRefuse != nil {
			d.opts.OnRefuse(r, "dashboard form without this session's form token or from another origin")
		}
		http.Error(w, "forbidden: the form is not from this dashboard session (reload the page)", http.StatusForbidden)
		return
	}
	a := approval.Answer{Approve: r.PostFormValue("approve") == "yes", Reason: r.PostFormValue("reason"), By: "admin token " + t.ID + " (dashboard)"}
	if d.opts.Approvals == nil {
		http.Error(w, "no approvals here", http.StatusNotFound)
		return
	}
	switch err := d.opts.Approvals.Answer(r.PathValue("id"), a); {
	case errors.Is(err, approval.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		http.Redirect(w, r, "/ui/approvals?done="+r.PathValue("id"), http.StatusSeeOther)
	}
}
