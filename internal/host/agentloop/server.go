package agentloop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/mcp"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/scripted"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
	"github.com/toolgate/toolgate/internal/host/wire"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// StartRequest is the body of POST /v1/agents/AGENT/sessions: a new session with a
// task, or a saved one continued (with a new task, or none to resume).
type StartRequest struct {
	Task     string `json:"task,omitempty"`
	Continue string `json:"continue,omitempty"` // a session id
	Provider string `json:"provider,omitempty"` // a name under gateway.models; default: chosen (Choose)
	Model    string `json:"model,omitempty"`    // default: the provider's default
	NoStream bool   `json:"noStream,omitempty"` // ask for whole answers, not streams
	Limits   Limits `json:"limits"`
	// Budget caps the run across every door (cost=2,calls=500); empty:
	// the agent's session.budget.
	Budget string `json:"budget,omitempty"`
}

// Server runs sessions for the admin API; each event is an NDJSON line of
// the answer, flushed as it happens. The client going away (Ctrl-C) stops
// the run: the session is saved as it was after its last whole step.
type Server struct {
	Model   Model
	Gateway Gateway
	Skills  Skills // nil: none
	Store   *Store
	// Config is the configuration in force (asked per request: reloads).
	Config func() *config.Config
	// HasKey reports whether a provider's secret resolves for an agent.
	HasKey func(agent, provider, secret string) bool
	// Tasks opens the budget of each run's session; nil: none.
	Tasks interface {
		Open(agent, session, spec string) (close func(), err error)
	}
}

// Default models of providers that serve real APIs, when neither the
// request nor the agent's model allowlist names one.
var DefaultModels = map[model.API]string{model.Anthropic: "claude-sonnet-4-5", model.OpenAI: "gpt-4.1"}

// Choice is the provider and model a new session uses.
type Choice struct {
	Provider string
	API      model.API
	Model    string
	Scripted bool
}

// Choose picks a new session's provider: the one asked for, or the first
// of the agent's model.providers whose key is there (a scripted provider
// needs none) — so with a key set a real model is used, and without one the
// scripted model. The model is the one asked for, the agent's allowlist's
// only literal entry, or the provider's default.
func Choose(cfg *config.Config, agent, provider, modelName string, hasKey func(agent, provider, secret string) bool) (Choice, error) {
	a := cfg.Agents[agent]
	if a == nil {
		return Choice{}, fmt.Errorf("agent %q is not configured", agent)
	}
	if a.Model == nil || len(a.Model.Providers) == 0 {
		return Choice{}, fmt.Errorf("agent %q has no model providers (agents.%s.model.providers; see gateway.models)", agent, agent)
	}
	names := a.Model.Providers
	if provider != "" {
		if !slices.Contains(names, provider) {
			return Choice{}, fmt.Errorf("provider %q is not one of agent %q's model providers (%s)", provider, agent, strings.Join(names, ", "))
		}
		names = []string{provider}
	}
	var missing []string
	for _, name := range names {
		p := cfg.Gateway.Models[name]
		if p.Secret != "" && !hasKey(agent, name, p.Secret) {
			missing = append(missing, fmt.Sprintf("%s (secret %s)", name, p.Secret))
			continue
		}
		c := Choice{Provider: name, API: model.API(p.API), Model: modelName, Scripted: p.Kind == scripted.Kind}
		if c.Model == "" {
			c.Model = defaultModel(c, a.Model.Allow)
		}
		return c, nil
	}
	return Choice{}, fmt.Errorf("no key for agent %q's providers: %s", agent, strings.Join(missing, ", "))
}

func defaultModel(c Choice, allow []string) string {
	if c.Scripted {
		return scripted.Model
	}
	if len(allow) == 1 && !strings.ContainsAny(allow[0], "*?[") {
		return allow[0]
	}
	return DefaultModels[c.API]
}

// maxStart bounds a start request (the task is the only large field).
const maxStart = 1 << 20

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	var req StartRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxStart))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: "the request is not a session start: " + err.Error()})
		return
	}
	sess, choice, err := s.open(agent, &req)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrNoSession) {
			status = http.StatusNotFound
		}
		wire.WriteError(w, status, &api.Error{Code: "bad_request", Message: err.Error()})
		return
	}
	if s.Tasks != nil {
		end, err := s.Tasks.Open(agent, sess.ID, req.Budget)
		if err != nil {
			wire.WriteError(w, http.StatusBadRequest, &api.Error{Code: "bad_request", Message: err.Error()})
			return
		}
		defer end()
	}
	visible := mcp.VisibleFromConfig(s.Config)(agent)
	w.Header().Set("Content-Type", api.MediaNDJSON)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var mu sync.Mutex // the loop emits from one goroutine; keep writes whole regardless
	enc := json.NewEncoder(w)
	run := &Run{Model: s.Model, Gateway: s.Gateway, Skills: s.Skills, Store: s.Store, Visible: visible,
		Limits: req.Limits, Stream: !req.NoStream, Scripted: choice.Scripted,
		Emit: func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			if enc.Encode(e) == nil {
				_ = rc.Flush()
			}
		}}
	run.Do(r.Context(), sess, req.Task)
}

// open starts a session or loads the one to continue.
func (s *Server) open(agent string, req *StartRequest) (*Session, Choice, error) {
	if strings.TrimSpace(req.Task) == "" && req.Continue == "" {
		return nil, Choice{}, errors.New("give a task, or a session to continue")
	}
	cfg := s.Config()
	if req.Continue != "" {
		sess, err := s.Store.Load(req.Continue)
		if err != nil {
			return nil, Choice{}, err
		}
		if sess.Agent != agent {
			return nil, Choice{}, fmt.Errorf("session %s is agent %q's, not %q's", sess.ID, sess.Agent, agent)
		}
		p, ok := cfg.Gateway.Models[sess.Provider]
		if !ok {
			return nil, Choice{}, fmt.Errorf("session %s used provider %q, which is no longer configured", sess.ID, sess.Provider)
		}
		return sess, Choice{Provider: sess.Provider, API: sess.API, Model: sess.Model, Scripted: p.Kind == scripted.Kind}, nil
	}
	c, err := Choose(cfg, agent, req.Provider, req.Model, s.HasKey)
	if err != nil {
		return nil, c, err
	}
	now := time.Now().UTC()
	return &Session{ID: gateway.NewID(), Agent: agent, Provider: c.Provider, API: c.API, Model: c.Model, Created: now}, c, nil
}
