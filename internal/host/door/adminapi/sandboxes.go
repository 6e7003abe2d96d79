package adminapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/toolgate/toolgate/internal/host/sandbox/lifecycle"
	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// The sandbox routes (toolgate sandbox ls|stop|rm|prune): a person's
// actions on the sandboxes, each recorded before it is done.

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	rows, err := s.Sandboxes(adminOf(r)).List(r.Context())
	if err != nil {
		wire.WriteError(w, http.StatusServiceUnavailable, &api.Error{Code: "unavailable", Message: err.Error()})
		return
	}
	wire.WriteJSON(w, rows)
}

// sandboxAction reads a stop's, rm's or prune's options; an empty body
// asks for none. ok false: the request is answered (400).
func sandboxAction(w http.ResponseWriter, r *http.Request) (in api.SandboxAction, ok bool) {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAnswer)).Decode(&in); err != nil && !errors.Is(err, io.EOF) {
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: "the body is not a sandbox action: " + err.Error()})
		return in, false
	}
	return in, true
}

// actOnSandbox runs stop or rm with the request's options.
func (s *Server) actOnSandbox(w http.ResponseWriter, r *http.Request) {
	in, ok := sandboxAction(w, r)
	if !ok {
		return
	}
	ans, err := s.Sandboxes(adminOf(r)).Act(r.Context(), r.PathValue("action"), r.PathValue("agent"), in)
	writeActed(w, ans, err)
}

func (s *Server) pruneSandboxes(w http.ResponseWriter, r *http.Request) {
	in, ok := sandboxAction(w, r)
	if !ok {
		return
	}
	ans, err := s.Sandboxes(adminOf(r)).Prune(r.Context(), in)
	writeActed(w, ans, err)
}

// writeActed answers what was done, or why not: a prune that removed some
// sandboxes and failed on others says both (207-like: 500 with the body).
func writeActed(w http.ResponseWriter, ans api.SandboxActed, err error) {
	switch {
	case err == nil:
		wire.WriteJSON(w, ans)
	case errors.Is(err, lifecycle.ErrUnknownAgent), errors.Is(err, lifecycle.ErrNoAction):
		wire.WriteError(w, http.StatusNotFound, &api.Error{Code: "not_found", Message: err.Error()})
	case errors.Is(err, lifecycle.ErrBusy):
		wire.WriteError(w, http.StatusConflict, &api.Error{Code: "conflict", Message: err.Error()})
	case errors.Is(err, lifecycle.ErrNotRecorded):
		wire.WriteError(w, http.StatusServiceUnavailable, &api.Error{Code: "unavailable", Message: err.Error()})
	default:
		wire.WriteError(w, http.StatusInternalServerError, &api.Error{Code: "internal", Message: err.Error()})
	}
}
