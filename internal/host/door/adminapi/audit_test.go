package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auditindex"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/auditquery"
)

// TestAuditRoutes: the CLI's client asks the admin API's audit routes over
// a real index: entries come back as written, with their place in the
// chain, including one written just before the question; a bad query is a
// 400 naming what is wrong; an index this process does not have open is a
// 503; a reindex answers how many entries it holds.
func TestAuditRoutes(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, "logs")
	w, err := audit.Open(dir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var ids []string
	write := func(n int) {
		for range n {
			e := &gateway.Entry{TS: time.Now().UTC(), ID: gateway.NewID(), Phase: gateway.PhaseDecision, Agent: "demo",
				Type: gateway.KindCore, Tool: "exec", Decision: "allow", Args: []byte(fmt.Sprintf(`{"command":"make t%d"}`, len(ids)))}
			if err := w.Append(e); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.ID)
		}
	}
	write(20)
	x, err := auditindex.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.OpenStore(filepath.Join(home, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := tokens.Create(auth.ScopeAdmin, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&Server{Tokens: tokens, Audit: x}).Handler())
	defer srv.Close()
	tokFile := filepath.Join(home, "admin.token")
	if err := os.WriteFile(tokFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := adminclient.DialAddr(strings.TrimPrefix(srv.URL, "http://"), tokFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	write(1) // the question covers it: the index is caught up first
	hits, err := c.AuditFind(ctx, auditquery.Query{ID: ids[20]})
	if err != nil || len(hits) != 1 || hits[0].Seq != 21 || hits[0].Entry.ID != ids[20] || hits[0].Entry.Hash == "" {
		t.Fatalf("the entry just written: %+v %v", hits, err)
	}
	hits, err = c.AuditFind(ctx, auditquery.Query{Text: "t7", Newest: true})
	if err != nil || len(hits) != 1 || hits[0].Entry.ID != ids[7] || string(hits[0].Entry.Args) != `{"command":"make t7"}` {
		t.Fatalf("by its words: %+v %v", hits, err)
	}
	if hits, err := c.AuditFind(ctx, auditquery.Query{Limit: 5, After: 10}); err != nil || len(hits) != 5 || hits[0].Seq != 11 {
		t.Fatalf("a page: %+v %v", hits, err)
	}

	get := func(query string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/audit/entries?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Error struct{ Message string } }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Error.Message
	}
	for q, says := range map[string]string{
		"agnet=demo":           `no parameter "agnet"`,
		"limit=20000":          "limit 20000",
		"decision=denied":      `no entry has decision "denied"`,
		"since=yesterday":      "since",
		"agent=a&agent=b":      "agent given 2 times",
		"text=x&newest=sorted": "newest",
	} {
		if code, msg := get(q); code != http.StatusBadRequest || !strings.Contains(msg, says) {
			t.Errorf("%s: %d %q, want 400 saying %q", q, code, msg, says)
		}
	}

	ans, err := c.AuditReindex(ctx)
	if err != nil || ans.Entries != 21 {
		t.Fatalf("reindex: %+v %v", ans, err)
	}
	if n, _ := x.Count(); n != 21 {
		t.Errorf("after the reindex the index holds %d entries", n)
	}

	x.Close() // as while another process holds the writer's lock
	var we *api.Error
	if _, err := c.AuditFind(ctx, auditquery.Query{}); !errors.As(err, &we) || we.Code != "unavailable" {
		t.Errorf("an index not open here: %v, want unavailable", err)
	}
}
