package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/lib/textsafe"
)

// The notifier kinds (config's).
const (
	KindWebhook = "webhook"
	KindSlack   = "slack"
)

// LinkPath is where the answer links point, under the link base.
const LinkPath = "/v1/approvals/link/"

// Notifier tells people of a waiting call where they are: a POST of a JSON
// document (webhook) or of a Slack-compatible incoming-webhook message
// (slack), each carrying single-use links that approve or deny it. A
// delivery that fails is tried again, Attempts times in all.
type Notifier struct {
	Name     string
	Kind     string
	URL      string // secrets expanded; never logged
	Timeout  time.Duration
	Attempts int
	Client   *http.Client // nil: one without a proxy or redirects
}

// Notice is what a notifier is sent about one waiting call.
type Notice struct {
	Type     string  `json:"type"` // toolgate.approval.asked
	Notifier string  `json:"notifier"`
	Call     Pending `json:"call"`
	Links    struct {
		Approve string `json:"approve"`
		Deny    string `json:"deny"`
	} `json:"links"`
}

// backoff is the wait before attempt i+1 (a variable for the tests).
var backoff = func(i int) time.Duration { return 200 * time.Millisecond << i }

func (n *Notifier) client() *http.Client {
	if n.Client != nil {
		return n.Client
	}
	return &http.Client{
		Transport: &http.Transport{Proxy: nil, MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second},
		// A receiver that redirects is answered, not followed: the
		// call's facts go to the URL configured and nowhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Send delivers the notice, trying again on failure, until an attempt
// succeeds (a 2xx answer), the attempts are spent or ctx ends.
func (n *Notifier) Send(ctx context.Context, no Notice) error {
	body, err := n.payload(no)
	if err != nil {
		return err
	}
	c := n.client()
	var last error
	for i := range max(n.Attempts, 1) {
		if i > 0 {
			select {
			case <-time.After(backoff(i - 1)):
			case <-ctx.Done():
				return fmt.Errorf("%w (after %d attempts; last: %v)", ctx.Err(), i, last)
			}
		}
		if last = n.attempt(ctx, c, body); last == nil {
			return nil
		}
	}
	return fmt.Errorf("%d attempts failed; last: %w", max(n.Attempts, 1), last)
}

func (n *Notifier) attempt(ctx context.Context, c *http.Client, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("the URL is not usable") // never quoted: it may hold a secret
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolgate-approvals")
	resp, err := c.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap() // *url.Error quotes the URL
		}
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}

func (n *Notifier) payload(no Notice) ([]byte, error) {
	var v any
	switch n.Kind {
	case KindWebhook:
		v = no
	case KindSlack:
		v = slackMessage(no)
	default:
		return nil, fmt.Errorf("notifier %s: unknown kind %q", n.Name, n.Kind)
	}
	// As written, not HTML-escaped: mrkdwn's own escapes must arrive as such.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return b.Bytes(), err
}

// slackMessage renders a notice as an incoming-webhook message: a header,
// the rule and its reason, the call's facts, the session's labels and
// two buttons. Everything the agent controls is escaped for mrkdwn
// (&, <, >: no link or mention can be smuggled in) and for a terminal's
// controls, and cut to Slack's field limits.
func slackMessage(no Notice) map[string]any {
	p := no.Call
	title := fmt.Sprintf("toolgate: agent %s asks to run %s", p.Agent, p.Tool)
	facts := []map[string]any{
		field("Agent", p.Agent), field("Kind", string(p.Kind)), field("Tool", p.Tool), field("Rule", p.Rule),
	}
	for _, f := range []struct{ k, v string }{{"Path", p.Path}, {"Command", p.Command}, {"Argv", strings.Join(p.Argv, " ")},
		{"Host", hostPort(p)}, {"Session", p.Session}, {"Input", inputLine(p.Input)}} {
		if f.v != "" {
			facts = append(facts, field(f.k, f.v))
		}
	}
	blocks := []map[string]any{
		{"type": "header", "text": map[string]any{"type": "plain_text", "text": clip(title, 150)}},
		{"type": "section", "text": mrkdwn("*" + mdEscape(p.Rule) + "*: " + mdEscape(p.Reason))},
		{"type": "section", "fields": facts[:min(len(facts), 10)]},
	}
	if l := labelLines(p); l != "" {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []any{mrkdwn(l)}})
	}
	if p.Args != "" && p.Args != "{}" {
		blocks = append(blocks, map[string]any{"type": "section", "text": mrkdwn("```" + clip(mdEscape(strings.ReplaceAll(p.Args, "```", "'''")), 2900) + "```")})
	}
	blocks = append(blocks,
		map[string]any{"type": "context", "elements": []any{mrkdwn(fmt.Sprintf("call %s · digest %.16s · policy %s · answer by %s",
			mdEscape(p.ID), p.Digest, mdEscape(p.Policy), p.Deadline.UTC().Format(time.RFC3339)))}},
		map[string]any{"type": "actions", "elements": []any{
			map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": "Approve"}, "style": "primary", "url": no.Links.Approve, "action_id": "approve"},
			map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": "Deny"}, "style": "danger", "url": no.Links.Deny, "action_id": "deny"},
		}})
	return map[string]any{"text": clip(title+": "+p.Reason, 3000), "blocks": blocks}
}

func field(k, v string) map[string]any { return mrkdwn("*" + k + "*\n" + clip(mdEscape(v), 1900)) }

func mrkdwn(s string) map[string]any { return map[string]any{"type": "mrkdwn", "text": s} }

// mdEscape makes agent-controlled text inert in Slack's mrkdwn.
func mdEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(textsafe.Line(s))
}

func clip(s string, n int) string {
	line, cut := textsafe.Clip(s, n)
	if cut > 0 {
		return line + "…"
	}
	return line
}

func hostPort(p Pending) string {
	if p.Host == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", p.Host, p.Port)
}

func inputLine(in *Input) string {
	if in == nil {
		return ""
	}
	return fmt.Sprintf("%d bytes, sha256 %.16s…", in.Bytes, in.SHA256)
}

// labelLines lists the session's labels with where each came from.
func labelLines(p Pending) string {
	labels := p.AgentLabels
	whose := "the agent's sessions"
	if len(p.Labels) > 0 {
		labels, whose = p.Labels, "this session"
	}
	if len(labels) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Labels of " + whose + ":")
	for _, l := range slices.Sorted(maps.Keys(labels)) {
		g := labels[l]
		fmt.Fprintf(&b, " *%s* ← %s %s (call %s, %s);", mdEscape(l), mdEscape(g.Tool), mdEscape(g.Target), mdEscape(g.Call),
			g.At.UTC().Format(time.TimeOnly))
	}
	return clip(strings.TrimSuffix(b.String(), ";"), 2900)
}

// notifyAll sends the notice of one waiting call to every notifier at
// once and returns an error naming each failure when none delivered it.
func notifyAll(ctx context.Context, ns []*Notifier, links *Links, base string, p Pending, log *slog.Logger) error {
	type sent struct {
		name string
		err  error
	}
	done := make(chan sent, len(ns))
	for _, n := range ns {
		no := Notice{Type: "toolgate.approval.asked", Notifier: n.Name, Call: p}
		c := Claims{Call: p.ID, Digest: p.Digest, Policy: p.Policy, Notifier: n.Name, Expires: p.Deadline.Unix() + 1}
		c.Approve = true
		no.Links.Approve = base + LinkPath + links.Sign(c)
		c.Approve = false
		no.Links.Deny = base + LinkPath + links.Sign(c)
		go func() { done <- sent{n.Name, n.Send(ctx, no)} }()
	}
	var failed []string
	for range ns {
		s := <-done
		if s.err == nil {
			return nil // one is enough: a person was told; the rest finish on their own
		}
		log.Warn("an approval notifier failed", "notifier", s.name, "call", p.ID, "err", s.err)
		failed = append(failed, s.name+": "+s.err.Error())
	}
	return errors.New(strings.Join(failed, "; "))
}
