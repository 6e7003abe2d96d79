package sandbox

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Handle is what every backend's sandbox handle keeps of the agent's
// current sandbox: the backend's reference to it (a container id, a pod's
// name and UID), the spec it was made from, and whether it is stale — to
// be made anew on its next use (its spec changed, it was removed, it died
// under a call) — and the queue its calls wait in for their turn. The
// handle outlives the sandboxes it points at.
type Handle[R any] struct {
	mu    sync.Mutex
	ref   R
	spec  AgentSpec
	stale bool
	queue Queue
}

// Queue is the queue the sandbox's calls wait in.
func (h *Handle[R]) Queue() *Queue { return &h.queue }

// Admit waits for a call's turn on the sandbox (Queue, with the limit its
// CPU share gives) and says how long it waited; leave ends the turn.
func (h *Handle[R]) Admit(ctx context.Context) (leave func(), waited time.Duration, err error) {
	_, spec := h.Current()
	start := time.Now()
	leave, err = h.queue.Enter(ctx, QueueLimit(spec.CPUs), QueueGrace)
	return leave, time.Since(start), err
}

// Set points the handle at a new sandbox, made from spec: no longer stale.
func (h *Handle[R]) Set(ref R, spec AgentSpec) {
	h.mu.Lock()
	h.ref, h.spec, h.stale = ref, spec, false
	h.mu.Unlock()
}

// MarkStale has the sandbox made anew on its next use.
func (h *Handle[R]) MarkStale() {
	h.mu.Lock()
	h.stale = true
	h.mu.Unlock()
}

// Stale reports whether the sandbox is to be made anew.
func (h *Handle[R]) Stale() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stale
}

// Current is the sandbox the handle points at and the spec it was made from.
func (h *Handle[R]) Current() (R, AgentSpec) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ref, h.spec
}

// Ref is the sandbox the handle points at.
func (h *Handle[R]) Ref() R {
	r, _ := h.Current()
	return r
}

// Registry is a backend's table of agents: each configured agent's spec,
// one handle B per agent (made when the agent is first configured and kept
// across recreations and reloads, so a call's handle stays valid), and one
// lock per agent, so a single bring-up at a time touches its sandbox.
type Registry[B any] struct {
	newBox func(agent string) *B

	mu    sync.Mutex
	specs map[string]AgentSpec
	boxes map[string]*B
	locks map[string]*sync.Mutex
}

// NewRegistry is an empty registry whose handles newBox makes.
func NewRegistry[B any](newBox func(agent string) *B) *Registry[B] {
	return &Registry[B]{newBox: newBox, specs: map[string]AgentSpec{}, boxes: map[string]*B{}, locks: map[string]*sync.Mutex{}}
}

// box is the agent's handle, made when it has none; under r.mu.
func (r *Registry[B]) box(agent string) *B {
	b := r.boxes[agent]
	if b == nil {
		b = r.newBox(agent)
		r.boxes[agent] = b
	}
	return b
}

// Register installs spec as its agent's and returns the agent's handle and
// lock.
func (r *Registry[B]) Register(spec AgentSpec) (*B, *sync.Mutex) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.specs[spec.Agent] = spec
	lock := r.locks[spec.Agent]
	if lock == nil {
		lock = &sync.Mutex{}
		r.locks[spec.Agent] = lock
	}
	return r.box(spec.Agent), lock
}

// Configure installs specs as the whole configuration (a start or a
// reload): agents not among them are no longer configured. each is called,
// under the registry's lock, with every agent's handle, its new spec and
// whether that gives another sandbox than the spec before it; its errors
// are joined.
func (r *Registry[B]) Configure(specs []AgentSpec, each func(b *B, spec AgentSpec, changed bool) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]AgentSpec, len(specs))
	var errs []error
	for _, s := range specs {
		next[s.Agent] = s
		old, had := r.specs[s.Agent]
		errs = append(errs, each(r.box(s.Agent), s, had && !old.SameSandbox(s)))
	}
	r.specs = next
	return errors.Join(errs...)
}

// Spec is the agent's configured spec.
func (r *Registry[B]) Spec(agent string) (AgentSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.specs[agent]
	return s, ok
}

// Lookup is the agent's handle (nil when it was never configured) and its
// configured spec.
func (r *Registry[B]) Lookup(agent string) (b *B, spec AgentSpec, configured bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	spec, configured = r.specs[agent]
	return r.boxes[agent], spec, configured
}

// Status asks one for the status of each configured agent, by name, with
// its handle; one runs outside the registry's lock, so it may ask the
// backend. The first error ends the listing.
func (r *Registry[B]) Status(one func(agent string, b *B) (Status, error)) ([]Status, error) {
	r.mu.Lock()
	agents := make([]string, 0, len(r.specs))
	for a := range r.specs {
		agents = append(agents, a)
	}
	boxes := make([]*B, len(agents))
	slices.Sort(agents)
	for i, a := range agents {
		boxes[i] = r.boxes[a]
	}
	r.mu.Unlock()
	out := make([]Status, 0, len(agents))
	for i, a := range agents {
		st, err := one(a, boxes[i])
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
