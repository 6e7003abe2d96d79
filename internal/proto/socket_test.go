package proto

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// CallPath builds exactly what the server's CallPattern route matches.
func TestCallPathMatchesPattern(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	var got string
	mux.HandleFunc("POST "+CallPattern, func(_ http.ResponseWriter, r *http.Request) { got = r.PathValue("name") })
	for _, name := range []string{"echo", "my-tool.v2", "a_b"} {
		got = ""
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", CallPath(name), nil))
		if rec.Code != http.StatusOK || got != name {
			t.Errorf("CallPath(%q): status %d, name %q", name, rec.Code, got)
		}
	}
}
