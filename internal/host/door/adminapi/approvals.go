package adminapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/internal/host/approval"
	"github.com/toolgate/toolgate/internal/host/auth"
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
	a := approval.Answer{Approve: in.Approve, Reason: in.Reason, SameArgs: in.SameArgs, By: "admin"}
	if in.For != "" {
		if a.For, err = time.ParseDuration(in.For); err != nil {
			wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: fmt.Sprintf("for: %q is not a duration (e.g. 1h)", in.For)})
			return
		}
	}
	if t, ok := auth.TokenFrom(r.Context()); ok {
		a.By = "admin token " + t.ID
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
