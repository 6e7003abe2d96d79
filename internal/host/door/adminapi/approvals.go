package adminapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/session"
	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// maxAnswer bounds an answer's body; a reason is a sentence.
const maxAnswer = 16 << 10

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	wire.WriteJSON(w, s.Approvals.List())
}

// getApproval answers one waiting call, all of it (its input uncut).
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	p, err := s.Approvals.Get(r.PathValue("id"))
	if err != nil {
		wire.WriteError(w, http.StatusNotFound, &api.Error{Code: "not_found", Message: err.Error()})
		return
	}
	wire.WriteJSON(w, p)
}

func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request) {
	var in api.ApprovalAnswer
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAnswer))
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: "answer: " + err.Error()})
		return
	}
	a := approval.Answer{Approve: in.Approve, Reason: in.Reason, SameArgs: in.SameArgs, Raise: in.Raise, By: adminOf(r)}
	if in.For != "" {
		if a.For, err = time.ParseDuration(in.For); err != nil {
			wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: fmt.Sprintf("for: %q is not a duration (e.g. 1h)", in.For)})
			return
		}
	}
	switch err := s.Approvals.Answer(r.PathValue("id"), a); {
	case errors.Is(err, approval.ErrNotFound):
		wire.WriteError(w, http.StatusNotFound, &api.Error{Code: "not_found", Message: err.Error()})
	case err != nil:
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: err.Error()})
	default:
		wire.WriteJSON(w, map[string]string{"status": "answered"})
	}
}

// adminOf names the admin behind a request, as answers record them.
func adminOf(r *http.Request) string {
	if t, ok := auth.TokenFrom(r.Context()); ok {
		return "admin token " + t.ID
	}
	return "admin"
}

// The answer links (approval.Links): no admin token needed, the link is
// the credential — or, with gateway.approvals.requireToken, a link and
// an admin token. GET shows the call and a button; only the POST answers,
// so a chat client unfurling the link, or a browser prefetching it,
// answers nothing.

func (s *Server) linkPage(w http.ResponseWriter, r *http.Request) {
	c, p, err := s.Approvals.Link(r.PathValue("token"))
	if err != nil {
		s.refuseLink(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	_ = linkTemplate().Execute(w, linkView{Claims: c, Call: p, Verb: verb(c.Approve), Token: s.Approvals.RequiresToken()})
}

func (s *Server) answerLink(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxAnswer)
	secret, ok := auth.BearerToken(r.Header.Get("Authorization"))
	if !ok && r.ParseForm() == nil {
		secret = r.PostForm.Get("token")
	}
	var tok *auth.Token
	if secret != "" {
		t, err := s.Tokens.Authenticate(secret, auth.ScopeAdmin)
		if err != nil {
			s.refuseLink(w, r, errors.New("the token given with the link is not a valid admin token"))
			return
		}
		tok = t
	}
	if tok == nil && s.Approvals.RequiresToken() {
		s.refuseLink(w, r, errors.New("this gateway answers links only with an admin token (gateway.approvals.requireToken)"))
		return
	}
	from := "admin.sock"
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		from = ap.Addr().String()
	}
	c, err := s.Approvals.AnswerLink(r.PathValue("token"), func(c approval.Claims) string {
		if tok != nil {
			return fmt.Sprintf("admin token %s (link sent to %s)", tok.ID, c.Notifier)
		}
		return fmt.Sprintf("link sent to %s, presented from %s", c.Notifier, from)
	})
	if err != nil {
		s.refuseLink(w, r, err)
		return
	}
	if wantsJSON(r) {
		wire.WriteJSON(w, map[string]any{"status": "answered", "call": c.Call, "approve": c.Approve})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = linkTemplate().Execute(w, linkView{Claims: c, Verb: verb(c.Approve), Done: true})
}

// refuseLink answers a link that cannot be used, and puts it on record
// as a refused request (without the token: a forged one is noise, and a
// spent one is no one's business).
func (s *Server) refuseLink(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusForbidden
	switch {
	case errors.Is(err, approval.ErrLinkMalformed):
		status = http.StatusBadRequest
	case errors.Is(err, approval.ErrLinkExpired):
		status = http.StatusGone
	case errors.Is(err, approval.ErrLinkUsed):
		status = http.StatusConflict
	}
	shown := r.Clone(r.Context())
	shown.URL.Path = approval.LinkPath + "…"
	s.recordRefusal(shown, err.Error(), ViaLink)
	wire.WriteError(w, status, &api.Error{Code: "link_refused", Message: err.Error()})
}

// ViaLink is the entry point of answers by link, as refusals record it.
const ViaLink = "approval-link"

func verb(approve bool) string {
	if approve {
		return "Approve"
	}
	return "Deny"
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json") || strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
}

type linkView struct {
	Claims approval.Claims
	Call   approval.Pending
	Verb   string
	Token  bool // ask for an admin token
	Done   bool
}

var linkTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("link").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>toolgate: {{.Verb}} call {{.Claims.Call}}</title>
<style>body{font:15px/1.45 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}
dt{font-weight:600;margin-top:.5rem}pre{background:#f4f4f4;padding:.5rem;white-space:pre-wrap;word-break:break-all}
button{font-size:1rem;padding:.5rem 1.2rem}</style></head><body>
{{if .Done}}<h1>{{if .Claims.Approve}}Approved{{else}}Denied{{end}}</h1><p>Call {{.Claims.Call}} has its answer; the link is spent.</p>
{{else}}<h1>{{.Verb}} this call?</h1>
<dl><dt>Agent</dt><dd>{{.Call.Agent}}</dd><dt>Tool</dt><dd>{{.Call.Kind}} {{.Call.Tool}}</dd>
<dt>Rule</dt><dd>{{.Call.Rule}}: {{.Call.Reason}}</dd>
{{with .Call.Path}}<dt>Path</dt><dd>{{.}}</dd>{{end}}{{with .Call.Command}}<dt>Command</dt><dd><pre>{{.}}</pre></dd>{{end}}
{{with .Call.Host}}<dt>Host</dt><dd>{{.}}:{{$.Call.Port}}</dd>{{end}}
{{with .Call.Session}}<dt>Session</dt><dd>{{.}}</dd>{{end}}
{{range $l, $g := .Call.AgentLabels}}<dt>Label {{$l}}</dt><dd>{{$g.Tool}} {{$g.Target}} (call {{$g.Call}}, {{$g.At.UTC.Format "15:04:05"}})</dd>{{end}}
<dt>Arguments</dt><dd><pre>{{.Call.Args}}</pre></dd>
<dt>Digest</dt><dd>{{.Call.Digest}}</dd><dt>Answer by</dt><dd>{{.Call.Deadline.UTC.Format "2006-01-02 15:04:05"}} UTC</dd></dl>
<form method="post">{{if .Token}}<p><label>Admin token <input type="password" name="token" autocomplete="off" required></label></p>{{end}}
<button type="submit">{{.Verb}}</button></form>{{end}}
</body></html>`))
})

// Labels reads and clears the session labels of agents.
type Labels interface {
	Facts(call *gateway.Call) *gateway.SessionFacts
	Clear(agent string) map[string]gateway.Label
}

func (s *Server) agentKnown(w http.ResponseWriter, agent string) bool {
	if _, ok := s.Gateway.Snapshot().Agents[agent]; !ok {
		wire.WriteError(w, http.StatusNotFound, &api.Error{Code: "not_found", Message: fmt.Sprintf("no agent %q", agent)})
		return false
	}
	return true
}

func (s *Server) listLabels(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	if !s.agentKnown(w, agent) {
		return
	}
	f := s.Labels.Facts(&gateway.Call{Agent: agent})
	wire.WriteJSON(w, api.Labels{Agent: agent, Labels: f.Agent.Labels})
}

// clearLabels takes every label from an agent, on the record first: a
// clear that could not be recorded clears nothing.
func (s *Server) clearLabels(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	if !s.agentKnown(w, agent) {
		return
	}
	var in api.Labels
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAnswer)).Decode(&in); err != nil || strings.TrimSpace(in.Reason) == "" {
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: `give a reason ({"reason":"…"}): it is recorded with the clear`})
		return
	}
	names := slices.Sorted(maps.Keys(s.Labels.Facts(&gateway.Call{Agent: agent}).Agent.Labels))
	id, err := s.Gateway.Observe(&gateway.Observation{Agent: agent, Type: gateway.KindAdmin, Tool: session.ToolClear, Via: gateway.ViaAdmin,
		Verdict: gateway.VerdictCleared, Detail: map[string]any{"by": adminOf(r), "reason": in.Reason, "cleared": names}})
	if err != nil {
		wire.WriteError(w, http.StatusServiceUnavailable, &api.Error{Code: "unavailable", Message: "the clear could not be recorded, so nothing was cleared: " + err.Error()})
		return
	}
	wire.WriteJSON(w, api.Labels{Agent: agent, Labels: s.Labels.Clear(agent), Reason: in.Reason, Entry: id})
}
