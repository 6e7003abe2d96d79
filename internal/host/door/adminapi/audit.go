package adminapi

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/auditquery"
)

// AuditIndex is the audit index the admin API answers the CLI's audit
// queries from: auditindex.Index, which the daemon alone writes, so the
// CLI neither writes it nor races the daemon's follower.
type AuditIndex interface {
	// CatchUp indexes what the log got since the last catch-up.
	CatchUp() (int, error)
	Find(q auditquery.Query) ([]auditquery.Hit, error)
	// Rebuild indexes the whole log again and swaps the result in.
	Rebuild(ctx context.Context) (int, error)
}

// auditEntries answers GET /v1/audit/entries?QUERY (auditquery.Values):
// the index is caught up first, so the answer covers every entry written
// before the request.
func (s *Server) auditEntries(w http.ResponseWriter, r *http.Request) {
	q, err := auditquery.Parse(r.URL.Query())
	if err != nil {
		auditError(w, err)
		return
	}
	if _, err := s.Audit.CatchUp(); err != nil {
		auditError(w, err)
		return
	}
	hits, err := s.Audit.Find(q)
	if err != nil {
		auditError(w, err)
		return
	}
	// Each entry as its line was written: no decoding and encoding again.
	w.Header().Set("Content-Type", "application/json")
	b := bufio.NewWriterSize(w, 64<<10)
	b.WriteString(`{"hits":[`)
	for i, h := range hits {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"seq":`)
		b.WriteString(strconv.FormatInt(h.Seq, 10))
		b.WriteString(`,"entry":`)
		b.Write(h.Line)
		b.WriteByte('}')
	}
	b.WriteString("]}\n")
	_ = b.Flush()
}

// auditReindex rebuilds the index beside the one in use (which answers
// meanwhile) and swaps it in: safe while calls are being recorded.
func (s *Server) auditReindex(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	n, err := s.Audit.Rebuild(r.Context()) // a client that leaves stops it
	if err != nil {
		auditError(w, err)
		return
	}
	wire.WriteJSON(w, api.Reindexed{Entries: n, Millis: time.Since(start).Milliseconds()})
}

func auditError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, auditquery.ErrBadQuery):
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: err.Error()})
	default:
		// The index is derived: whatever keeps it from answering, the log
		// has every entry (audit tail and verify read it).
		wire.WriteError(w, http.StatusServiceUnavailable, &api.Error{Code: "unavailable", Message: err.Error()})
	}
}
