package adminapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// linkEnv is the admin API with approvals told to a webhook on loopback
// whose person answers at once, by the link its notice carries.
type linkEnv struct {
	*refusalEnv
	store    *approval.Store
	admin    *httptest.Server
	token    string
	withAuth bool // the person sends the admin token with the link
	answer   string
}

func newLinkEnv(t testing.TB, requireToken bool) *linkEnv {
	e := &linkEnv{refusalEnv: newRefusalEnv(t, 100, time.Minute), store: approval.New(nil), answer: "approve"}
	tokens, err := auth.OpenStore(filepath.Join(t.TempDir(), "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if e.token, _, err = tokens.Create(auth.ScopeAdmin, "", 0); err != nil {
		t.Fatal(err)
	}
	e.admin = httptest.NewServer((&Server{Gateway: e.gw, Tokens: tokens, Approvals: e.store}).Handler())
	person := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n approval.Notice
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			w.WriteHeader(400)
			return
		}
		link := n.Links.Approve
		if e.answer == "deny" {
			link = n.Links.Deny
		}
		req, _ := http.NewRequest("POST", link, nil)
		req.Header.Set("Accept", "application/json")
		if e.withAuth {
			req.Header.Set("Authorization", "Bearer "+e.token)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}))
	e.store.SetNotify(&approval.Notify{LinkBase: e.admin.URL, RequireToken: requireToken, Logger: slog.New(slog.DiscardHandler),
		Notifiers: []*approval.Notifier{{Name: "person", Kind: approval.KindWebhook, URL: person.URL, Timeout: 5 * time.Second, Attempts: 1}}})
	t.Cleanup(func() { person.Close(); e.admin.Close() })
	return e
}

var asks = gateway.Decision{Ask: true, Rule: "ask", Reason: "a person decides", Policy: "p1"}

func askCall(id string) *gateway.Call {
	return &gateway.Call{ID: id, Agent: "demo", Kind: gateway.KindCore, Tool: "exec", Args: []byte(`{"command":"make deploy"}`), Command: "make deploy"}
}

// TestAnswerByLink: the person's link answers the call, and who answered
// is recorded: the link's notifier and address, or the admin token they
// sent with it; with requireToken a link alone answers nothing.
func TestAnswerByLink(t *testing.T) {
	t.Parallel()
	e := newLinkEnv(t, false)
	if a := e.store.Await(context.Background(), askCall("l1"), asks, 10*time.Second); !a.Allow || !strings.HasPrefix(a.By, "link sent to person, presented from 127.0.0.1") {
		t.Fatalf("approval %+v", a)
	}
	e.answer = "deny"
	if a := e.store.Await(context.Background(), askCall("l2"), asks, 10*time.Second); a.Allow || a.Outcome != "denied" {
		t.Fatalf("denial %+v", a)
	}

	strict := newLinkEnv(t, true)
	if a := strict.store.Await(context.Background(), askCall("l3"), asks, 2*time.Second); a.Allow || a.Outcome != "timeout" {
		t.Fatalf("a link without a token answered: %+v", a)
	}
	var refused bool
	for _, en := range strict.entries(t) {
		refused = refused || (en.Via == ViaLink && strings.Contains(en.Reason, "only with an admin token") && !strings.Contains(en.Tool, "v1."))
	}
	if !refused {
		t.Error("the refused link is not on record")
	}
	strict.withAuth = true
	if a := strict.store.Await(context.Background(), askCall("l4"), asks, 10*time.Second); !a.Allow || !strings.HasPrefix(a.By, "admin token ") {
		t.Fatalf("with a token: %+v", a)
	}
}

// BenchmarkApprovalRoundTrip is an ask told to a webhook on loopback and
// answered by its link at once: the goal is 20 ms plus the person.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	e := newLinkEnv(b, false)
	i := 0
	for b.Loop() {
		i++
		if a := e.store.Await(context.Background(), askCall("b"+strings.Repeat("x", i%7)+time.Now().Format("150405.000000000")), asks, 10*time.Second); !a.Allow {
			b.Fatalf("approval %+v", a)
		}
	}
}
