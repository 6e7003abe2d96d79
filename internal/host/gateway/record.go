package gateway

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// The gateway is the only author of audit entries. Three methods make them:
// Handle for calls (a decision, then a result), Observe for what toolgate
// saw but did not decide, and Refuse for requests refused before they
// became calls. All three go through bounded, so every field taken from a
// request is cut and redacted the same way, and through the one AuditSink,
// so every entry is in the one hash chain.

// Limits of the fields bounded applies on top of Options.BoundArgs.
const (
	// MaxField bounds the name-like fields of an entry: agent, tool, via,
	// session, parent, id. They come from URLs, headers and payloads.
	MaxField = 256
	// MaxText bounds reasons, errors and string details whatever BoundArgs
	// does (which usually cuts them sooner, at the configured maxArgBytes).
	MaxText = 16 << 10
)

// Cut returns s cut to at most max bytes on a rune boundary, with a visible
// marker saying how much was dropped (the marker the audit's argument
// bounder uses). A string within max is returned as is.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	keep := max
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return fmt.Sprintf("%s…[cut %d bytes]", s[:keep], len(s)-keep)
}

// Observation is something toolgate saw but did not decide: a Claude Code
// hook reporting a finished tool call, a line of a stream-json transcript,
// a model's answer relayed by a door. Observe records it as an entry of
// phase result whose decision is Verdict, so nothing counting decisions
// (allow/deny) ever counts it.
type Observation struct {
	// ID is the entry id. Give a stable one (derived from the event) when a
	// redelivery must be recognisable; empty gets a fresh NewID().
	ID      string
	Agent   string // from the transport, as for a call
	Type    Kind   // the entry's type: KindHook, KindObserved …
	Tool    string
	Via     string // the entry point: hook, ingest …
	Verdict string // the entry's decision: reported, observed … never allow or deny
	Args    json.RawMessage
	Session string
	Parent  string
	// DurationMs, ExitCode and Error describe the observed outcome, when known.
	DurationMs *float64
	ExitCode   *int
	Error      string
	// Detail holds the observation's facts; values are bounded like Args.
	Detail map[string]any
}

// Observe records o durably and returns its entry id. It does not touch
// the agent's call and denial counters: an observation is not a call.
//
//	id, err := gw.Observe(&gateway.Observation{Agent: agent, Type: gateway.KindObserved,
//		Tool: "model", Via: "model", Verdict: "observed", Args: req, Detail: map[string]any{"tokens": n}})
func (g *Gateway) Observe(o *Observation) (string, error) {
	if o.Verdict == "" || o.Verdict == (Decision{Allow: true}).Verdict() || o.Verdict == (Decision{}).Verdict() {
		return "", fmt.Errorf("gateway: an observation's verdict must name what was observed, not %q", o.Verdict)
	}
	id := o.ID
	if id == "" {
		id = NewID()
	}
	parent, detail := o.Parent, o.Detail
	g.links.unlink(o.Agent, &parent, &detail)
	e := g.bounded(&Entry{
		TS:         time.Now().UTC(),
		ID:         id,
		Phase:      PhaseResult,
		Agent:      o.Agent,
		Type:       o.Type,
		Tool:       o.Tool,
		Via:        o.Via,
		Args:       o.Args,
		Decision:   o.Verdict,
		DurationMs: o.DurationMs,
		ExitCode:   o.ExitCode,
		Error:      o.Error,
		Session:    o.Session,
		Parent:     parent,
		Detail:     detail,
	})
	if err := g.opts.Audit.Append(e); err != nil {
		return "", fmt.Errorf("%w: %v", ErrAuditUnavailable, err)
	}
	return e.ID, nil
}

// Refuse records a request refused before it became a call (a bad token, a
// malformed header, a connection over its limit) and returns the error to
// answer it with: a *DeniedError carrying the audit id, or an error
// wrapping ErrAuditUnavailable when the refusal could not be recorded. It
// never returns nil. A refusal naming an agent counts as one of its calls
// and one of its denials.
//
// source names who was refused: the remote host of a TCP request, the
// agent whose socket carried it. Per source and entry point, the first
// RefusalBurst refusals of every RefusalEvery are recorded one entry each,
// durable before Refuse returns; the rest are counted into one entry of
// rule RuleRefusalsCoalesced (count, first and last time, a sample of
// reasons) written when the interval ends, and their answers carry that
// entry's id. So a flood of refusals costs the disk one entry per interval,
// and the calls around it are not kept waiting behind refusal fsyncs.
//
// A door answers with wire.Refused:
//
//	dec := gateway.Decision{Rule: "model.limit", Reason: why}
//	wire.Refused(w, http.StatusTooManyRequests, "too_many", gw.Refuse(agent, call, dec))
func (g *Gateway) Refuse(source string, call *Call, dec Decision) error {
	if call.ID == "" {
		call.ID = NewID()
	}
	g.links.unlink(call.Agent, &call.Parent, &call.Detail)
	dec.Allow = false
	e := g.entry(call, nil, dec)
	alone, coalescedID := g.refusals.admit(source, e, g.flushRefusals)
	if alone {
		if err := g.opts.Audit.Append(e); err != nil {
			return fmt.Errorf("%w: %v", ErrAuditUnavailable, err)
		}
	} else {
		call.ID = coalescedID
	}
	if call.Agent != "" { // counted like a denial in Handle: a call, and a denial
		stats := g.Stats(call.Agent)
		stats.Calls.Add(1)
		stats.Denials.Add(1)
	}
	// The tool of a refusal is whatever the request named: not a label.
	g.observe(CallStats{Agent: call.Agent, Kind: call.Kind, Decision: "deny"})
	return &DeniedError{ID: call.ID, Decision: dec}
}

// bounded cuts and redacts every field of e that may come from a request,
// in place, and returns e. Detail gets a new map: the caller's (often a
// Call's, still in use) is left alone.
func (g *Gateway) bounded(e *Entry) *Entry {
	for _, f := range []*string{&e.ID, &e.Agent, &e.Tool, &e.Via, &e.Session, &e.Parent} {
		*f = Cut(*f, MaxField)
	}
	e.Reason = g.boundText(e.Reason)
	e.Error = g.boundText(e.Error)
	if g.opts.BoundArgs != nil && len(e.Args) > 0 {
		e.Args = g.opts.BoundArgs(e.Args)
	}
	if e.Detail != nil {
		d := make(map[string]any, len(e.Detail))
		for k, v := range e.Detail {
			d[Cut(k, MaxField)] = g.boundValue(v)
		}
		e.Detail = d
	}
	return e
}

// boundText bounds a free-text field: through BoundArgs (which redacts
// secrets) when there is one, and at MaxText in any case.
func (g *Gateway) boundText(s string) string {
	if s == "" || g.opts.BoundArgs == nil {
		return Cut(s, MaxText)
	}
	raw, _ := json.Marshal(s)
	var out string
	if json.Unmarshal(g.opts.BoundArgs(raw), &out) != nil {
		return "[unrecordable text]" // never the unredacted original
	}
	return Cut(out, MaxText)
}

// boundValue bounds one Detail value. Strings stay strings, scalars stay
// as they are; structured values go through BoundArgs as JSON.
func (g *Gateway) boundValue(v any) any {
	switch t := v.(type) {
	case nil, bool, int, int64, uint64, float64, json.Number:
		return v
	case string:
		return g.boundText(t)
	case json.RawMessage:
		if g.opts.BoundArgs == nil {
			return v
		}
		return g.opts.BoundArgs(t)
	}
	if g.opts.BoundArgs == nil {
		return v
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unrecordable detail: %v", err)
	}
	return g.opts.BoundArgs(raw)
}
