// Package dashboard is the operator's web view served by the gateway at /ui:
// server-rendered pages over the audit index (agents, a live feed of calls,
// sessions as trees, entries with their chain position, denials, policy)
// and the calls waiting for approval. A viewer token reads everything here
// and changes nothing; answering an approval takes the admin token.
package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// Prefix is where the dashboard is mounted.
const Prefix = "/ui/"

// CookieName holds the pasted token. It is HttpOnly (no script reads it),
// SameSite=Strict (no other site's page sends it) and scoped to /ui.
const CookieName = "toolgate_ui"

// Options are what the dashboard reads.
type Options struct {
	Tokens *auth.Store
	// Index answers every page about the log; nil shows the pages empty
	// with a note (the gateway runs on without its index).
	Index *auditindex.Index
	// Agents reports the sandboxes.
	Agents func(ctx context.Context) ([]api.AgentStatus, error)
	// Config is the configuration in force (its rules).
	Config    func() *config.Config
	Approvals *approval.Store
	// OnRefuse audits a request refused for its token.
	OnRefuse func(r *http.Request, reason string)
	// Poll is how often the live feed looks for new entries (default 100ms).
	Poll   time.Duration
	Logger *slog.Logger
}

// Dashboard serves /ui.
type Dashboard struct {
	opts  Options
	pages map[string]*template.Template
	// csrfKey binds the form token of an admin's session to its token id;
	// a restart changes it (open forms must be reloaded).
	csrfKey []byte
	// done ends the live feeds' streams at shutdown, which would
	// otherwise wait for them.
	done      chan struct{}
	closeOnce sync.Once
}

//go:embed web
var web embed.FS

// New builds the dashboard.
func New(opts Options) *Dashboard {
	if opts.Poll <= 0 {
		opts.Poll = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	d := &Dashboard{opts: opts, pages: map[string]*template.Template{}, csrfKey: make([]byte, 32), done: make(chan struct{})}
	_, _ = rand.Read(d.csrfKey)
	// line and text render what an agent controls (textsafe): html/template
	// escapes markup, not the bidirectional overrides and invisible
	// characters that reorder or hide what a person reads.
	funcs := template.FuncMap{"ago": ago, "short": short, "since": since, "line": textsafe.Line, "text": textsafe.Text}
	for _, p := range []string{"login", "agents", "feed", "session", "entry", "denials", "policy", "approvals"} {
		d.pages[p] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(web, "web/layout.html", "web/"+p+".html"))
	}
	return d
}

// Close ends the live feeds' streams.
func (d *Dashboard) Close() { d.closeOnce.Do(func() { close(d.done) }) }

// Handler serves the pages under Prefix.
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/login", d.loginForm)
	mux.HandleFunc("POST /ui/login", d.login)
	mux.HandleFunc("POST /ui/logout", d.logout)
	mux.HandleFunc("GET /ui/static/feed.js", d.static)
	mux.Handle("GET /ui/{$}", d.read(d.agents))
	mux.Handle("GET /ui/feed", d.read(d.feed))
	mux.Handle("GET /ui/feed/events", d.read(d.events))
	mux.Handle("GET /ui/session/{id}", d.read(d.session))
	mux.Handle("GET /ui/entry/{id}", d.read(d.entry))
	mux.Handle("GET /ui/denials", d.read(d.denials))
	mux.Handle("GET /ui/policy", d.read(d.policy))
	mux.Handle("GET /ui/approvals", d.read(d.approvals))
	mux.Handle("POST /ui/approvals/{id}", d.read(d.answer))
	return secureHeaders(mux)
}

// secureHeaders keeps the pages out of frames and other origins' scripts.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

type tokenKey struct{}

// read admits an admin or viewer token, from the cookie or a bearer
// header. Without one a browser is sent to the login page.
func (d *Dashboard) read(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := auth.BearerToken(r.Header.Get("Authorization"))
		if !ok {
			if c, err := r.Cookie(CookieName); err == nil {
				secret = c.Value
			}
		}
		if secret == "" {
			d.toLogin(w, r, "")
			return
		}
		tok, err := d.opts.Tokens.Lookup(secret)
		reason := "invalid, expired or revoked token"
		if err == nil && tok.Scope != auth.ScopeAdmin && tok.Scope != auth.ScopeViewer {
			reason = "token of scope " + string(tok.Scope) + " is not accepted for this request (requires viewer or admin)"
			err = auth.ErrUnauthorized
		}
		if err != nil {
			if d.opts.OnRefuse != nil {
				d.opts.OnRefuse(r, reason)
			}
			clearCookie(w)
			d.toLogin(w, r, reason)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)))
	})
}

func tokenOf(r *http.Request) *auth.Token {
	t, _ := r.Context().Value(tokenKey{}).(*auth.Token)
	return t
}

// toLogin sends a page request to the login form (a stream or a form post
// gets a plain 401).
func (d *Dashboard) toLogin(w http.ResponseWriter, r *http.Request, reason string) {
	if r.Method != http.MethodGet || strings.HasSuffix(r.URL.Path, "/events") {
		http.Error(w, "unauthorized: "+orDefault(reason, "log in at /ui/login"), http.StatusUnauthorized)
		return
	}
	v := url.Values{"next": {r.URL.RequestURI()}}
	if reason != "" {
		v.Set("error", reason)
	}
	http.Redirect(w, r, "/ui/login?"+v.Encode(), http.StatusSeeOther)
}

func (d *Dashboard) loginForm(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next")), "Error": r.URL.Query().Get("error")})
}

// login takes a pasted token and keeps it in the cookie.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	secret := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	tok, err := d.opts.Tokens.Lookup(secret)
	if err == nil && tok.Scope != auth.ScopeAdmin && tok.Scope != auth.ScopeViewer {
		err = auth.ErrUnauthorized
	}
	if err != nil {
		if d.opts.OnRefuse != nil {
			d.opts.OnRefuse(r, "dashboard login: not a valid viewer or admin token")
		}
		w.WriteHeader(http.StatusUnauthorized)
		d.render(w, r, "login", map[string]any{"Next": next, "Error": "not a valid viewer or admin token"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: secret, Path: "/ui", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, Expires: cookieExpiry(tok)})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// cookieExpiry ends the cookie with its token (a session cookie otherwise).
func cookieExpiry(t *auth.Token) time.Time {
	if t.Expires != nil {
		return *t.Expires
	}
	return time.Time{}
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	clearCookie(w)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

func clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// safeNext keeps a redirect after login on the dashboard: never another
// host, never a path outside /ui.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(path.Clean(u.Path)+"/", Prefix) ||
		strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix
	}
	return u.RequestURI()
}

// csrf is the form token of an admin's session: bound to its token id by
// a key only this process knows.
func (d *Dashboard) csrf(t *auth.Token) string {
	m := hmac.New(sha256.New, d.csrfKey)
	m.Write([]byte(t.ID))
	return hex.EncodeToString(m.Sum(nil))
}

// sameOrigin refuses a cross-site form post: the browser's Origin (or
// Fetch metadata) must name this host.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser's cross-site post (those carry Origin)
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, page string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Page"] = page
	if t := tokenOf(r); t != nil {
		data["Token"] = t
		data["Admin"] = t.Scope == auth.ScopeAdmin
		data["CSRF"] = d.csrf(t)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := d.pages[page].Execute(w, data); err != nil {
		d.opts.Logger.Warn("dashboard: rendering a page", "page", page, "err", err)
	}
}

func (d *Dashboard) static(w http.ResponseWriter, r *http.Request) {
	b, err := web.ReadFile("web/feed.js")
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	_, _ = w.Write(b)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

// short is the start of an id or a session, rendered safe (a session is
// a hint from a request).
func short(s string) string {
	head, _ := textsafe.Cut(s, 12)
	return textsafe.Line(head)
}
