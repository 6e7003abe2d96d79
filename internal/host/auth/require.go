package auth

import (
	"context"
	"net/http"

	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// RequireOptions configure Require.
type RequireOptions struct {
	// Also lets narrower scopes in, each only for the requests its predicate
	// admits (e.g. the MCP route takes a skills token for resources only).
	// A route that does not list a scope here refuses it.
	Also map[Scope]func(*http.Request) bool
	// OnRefuse, when set, is told of every refused request, e.g. to audit
	// it. The reason never contains the token.
	OnRefuse func(r *http.Request, reason string)
}

type tokenKey struct{}

// TokenFrom returns the token Require admitted the request with.
func TokenFrom(ctx context.Context) (*Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(*Token)
	return t, ok
}

// WithToken returns ctx carrying t, as Require leaves it (for tests and for
// entry points that authenticate by other means).
func WithToken(ctx context.Context, t *Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// Require returns middleware admitting a request only with a bearer token of
// the given scope, or of a scope opts.Also admits for this request. Every
// refusal is a 401 with the same vague reason classes: the caller never
// learns whether a token exists.
func Require(store *Store, scope Scope, opts RequireOptions) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, reason := admit(store, scope, opts, r)
			if tok == nil {
				if opts.OnRefuse != nil {
					opts.OnRefuse(r, reason)
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate", scope="`+string(scope)+`"`)
				wire.WriteError(w, http.StatusUnauthorized, &api.Error{Code: "unauthorized", Message: reason})
				return
			}
			next.ServeHTTP(w, r.WithContext(WithToken(r.Context(), tok)))
		})
	}
}

func admit(store *Store, scope Scope, opts RequireOptions, r *http.Request) (*Token, string) {
	secret, ok := BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return nil, "missing bearer token"
	}
	tok, err := store.Lookup(secret)
	if err != nil {
		return nil, "invalid, expired or revoked token"
	}
	if tok.Scope == scope {
		return tok, ""
	}
	if allow, ok := opts.Also[tok.Scope]; ok && allow(r) {
		return tok, ""
	}
	return nil, "token of scope " + string(tok.Scope) + " is not accepted for this request (requires " + string(scope) + ")"
}
