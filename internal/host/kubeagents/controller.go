// Package kubeagents is the Agent resource's controller (toolgate.dev/v1alpha1,
// deploy/kubernetes/agent-crd.yaml), run inside a node's gateway: it watches
// the Agents of its namespace, claims the unassigned ones (and those of a
// node that is gone or not ready) for its node, hands the ones it owns to
// the gateway as agents beside the config file's, and writes their status
// back — phase, pod, node, calls, denials, last error.
package kubeagents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Resource is the Agent resource.
var Resource = schema.GroupVersionResource{Group: "toolgate.dev", Version: "v1alpha1", Resource: "agents"}

// Phases of an Agent's status (the CRD's enum).
const (
	PhasePending = "Pending"
	PhaseRunning = "Running"
	PhaseFailed  = "Failed"
	PhaseUnknown = "Unknown"
)

// ErrNotUp marks a refusal the next round retries: the agent's sandbox
// did not come up (an invalid spec stays refused until it changes).
var ErrNotUp = errors.New("sandbox not up")

// maxError is the CRD's bound on status.lastError.
const maxError = 4096

// Gateway is what the controller needs of the gateway it runs in.
type Gateway interface {
	// Serve puts exactly these resource agents in force beside the config
	// file's and brings their sandboxes up. refused holds, by agent, those
	// it could not take (an invalid spec; a sandbox that did not start,
	// wrapping ErrNotUp); err means the change is not complete (the file
	// itself invalid, an old sandbox not removed) and is tried again.
	Serve(ctx context.Context, agents []config.Extra) (refused map[string]error, err error)
	// Sandbox is the agent's pod and its phase ("missing" when there is none).
	Sandbox(ctx context.Context, agent string) (pod, phase string, err error)
}

// Options configure a Controller.
type Options struct {
	Config    *rest.Config
	Namespace string
	Node      string // this gateway's node
	Gateway   Gateway
	// Resync is how often status (calls, denials, the pod) is refreshed
	// without a change to the Agents; 0: 5 s.
	Resync time.Duration
	Logger *slog.Logger
}

// Controller serves one namespace's Agents on one node's gateway.
type Controller struct {
	opts    Options
	dyn     dynamic.NamespaceableResourceInterface
	cs      kubernetes.Interface
	counter Counter
	changed chan struct{}

	mu      sync.Mutex
	served  map[string]string  // agent → generation of the spec served
	refused map[string]error   // what the gateway refused of it
	base    map[types.UID]base // call counts an Agent had when this process took it
}

type base struct{ calls, denials int64 }

// New makes a controller; Run starts it.
func New(opts Options) (*Controller, error) {
	if opts.Config == nil || opts.Namespace == "" || opts.Node == "" || opts.Gateway == nil {
		return nil, errors.New("kubeagents: config, namespace, node and gateway are required")
	}
	if opts.Resync <= 0 {
		opts.Resync = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dyn, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("kubeagents: %w", err)
	}
	cs, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("kubeagents: %w", err)
	}
	return &Controller{opts: opts, dyn: dyn.Resource(Resource), cs: cs, changed: make(chan struct{}, 1),
		counter: Counter{n: map[string]*counts{}}, served: map[string]string{}, base: map[types.UID]base{}}, nil
}

// Observer counts the calls of every agent for the status; the gateway
// is to tell it each call (gateway.Options.Observer).
func (c *Controller) Observer() gateway.Observer { return &c.counter }

// Check lists the namespace's Agents once: an error names what is
// missing (the CRD, access).
func (c *Controller) Check(ctx context.Context) error {
	if _, err := c.dyn.Namespace(c.opts.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("kubeagents: listing Agents in %s (is deploy/kubernetes/agent-crd.yaml applied? or set gateway.sandbox.kubernetes.agents: false): %w", c.opts.Namespace, err)
	}
	return nil
}

// Run watches the namespace's Agents until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(c.opts.Config), 0, c.opts.Namespace, nil)
	inf := f.ForResource(Resource).Informer()
	poke := func() {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke() }, UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	tick := time.NewTicker(c.opts.Resync)
	defer tick.Stop()
	for {
		var agents []*unstructured.Unstructured
		for _, o := range inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				agents = append(agents, u)
			}
		}
		c.reconcile(ctx, agents)
		select {
		case <-ctx.Done():
			return nil
		case <-c.changed:
		case <-tick.C:
		}
	}
}

// reconcile claims, serves and reports; what fails is retried on the next
// change or tick.
func (c *Controller) reconcile(ctx context.Context, agents []*unstructured.Unstructured) {
	log := c.opts.Logger
	nodes := map[string]bool{} // node → ready, asked once per round
	var mine []*unstructured.Unstructured
	for _, a := range agents {
		if a.GetDeletionTimestamp() != nil {
			continue
		}
		owner, _, _ := unstructured.NestedString(a.Object, "status", "node")
		switch {
		case owner == c.opts.Node:
		case owner != "" && c.ready(ctx, nodes, owner):
			continue // another gateway's
		default:
			claimed, err := c.claim(ctx, a, owner)
			if err != nil {
				if !apierrors.IsConflict(err) {
					log.Warn("claiming an Agent", "agent", a.GetName(), "err", err)
				}
				continue // someone else was quicker, or a retry next round
			}
			log.Info("claimed an Agent", "agent", a.GetName(), "from_node", owner)
			a = claimed
		}
		mine = append(mine, a)
	}

	extras := make([]config.Extra, 0, len(mine))
	want := map[string]string{}
	for _, a := range mine {
		spec, _, _ := unstructured.NestedMap(a.Object, "spec")
		entry, err := json.Marshal(spec)
		if err != nil {
			continue // unreachable: it came from JSON
		}
		extras = append(extras, config.Extra{Name: a.GetName(), Source: "Agent " + a.GetNamespace() + "/" + a.GetName(), Entry: entry})
		want[a.GetName()] = fmt.Sprint(a.GetGeneration())
	}
	c.mu.Lock()
	same := maps.Equal(want, c.served)
	refused := c.refused
	c.mu.Unlock()
	if !same {
		r, err := c.opts.Gateway.Serve(ctx, extras)
		if err != nil {
			if ctx.Err() == nil {
				log.Error("serving the Agents; tried again next round", "err", err)
			}
			return
		}
		refused = r
		c.mu.Lock()
		c.served, c.refused = want, r
		for _, e := range r {
			if errors.Is(e, ErrNotUp) {
				c.served = nil // tried again on the next round
			}
		}
		c.mu.Unlock()
	}
	for _, a := range mine {
		if err := c.report(ctx, a, refused[a.GetName()]); err != nil && !apierrors.IsNotFound(err) {
			log.Warn("writing an Agent's status", "agent", a.GetName(), "err", err)
		}
	}
}

// ready reports whether node exists and is Ready; nodes caches the answers
// of one round.
func (c *Controller) ready(ctx context.Context, nodes map[string]bool, node string) bool {
	if r, ok := nodes[node]; ok {
		return r
	}
	n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	r := err == nil || !apierrors.IsNotFound(err) // unsure (API trouble): leave it to its owner
	if err == nil {
		r = false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				r = cond.Status == corev1.ConditionTrue
			}
		}
	}
	nodes[node] = r
	return r
}

// claim makes this node the Agent's owner. The update carries the
// resourceVersion read: of two gateways claiming at once, one gets a
// conflict.
func (c *Controller) claim(ctx context.Context, a *unstructured.Unstructured, from string) (*unstructured.Unstructured, error) {
	a = a.DeepCopy()
	st, _, _ := unstructured.NestedMap(a.Object, "status")
	if st == nil {
		st = map[string]any{}
	}
	st["node"], st["phase"] = c.opts.Node, PhasePending
	delete(st, "pod")
	if from != "" {
		st["lastError"] = fmt.Sprintf("node %s is gone or not ready; taken over by node %s", from, c.opts.Node)
	}
	a.Object["status"] = st
	return c.dyn.Namespace(a.GetNamespace()).UpdateStatus(ctx, a, metav1.UpdateOptions{})
}

// report writes the Agent's status when it changed.
func (c *Controller) report(ctx context.Context, a *unstructured.Unstructured, refused error) error {
	calls, denials := c.counts(a)
	st := map[string]any{"node": c.opts.Node, "calls": calls, "denials": denials, "observedGeneration": a.GetGeneration()}
	if refused != nil {
		st["phase"], st["lastError"] = PhaseFailed, bound(refused.Error())
	} else {
		pod, phase, err := c.opts.Gateway.Sandbox(ctx, a.GetName())
		switch {
		case err != nil:
			st["phase"], st["lastError"] = PhaseUnknown, bound(err.Error())
		default:
			st["phase"], st["pod"] = podPhase(phase), pod
		}
	}
	old, _, _ := unstructured.NestedMap(a.Object, "status")
	if sameStatus(old, st) {
		return nil
	}
	// Fields this status does not set are cleared (a lastError that no
	// longer holds, the pod of a refused spec).
	for _, k := range []string{"pod", "lastError"} {
		if _, ok := st[k]; !ok {
			st[k] = nil
		}
	}
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	_, err = c.dyn.Namespace(a.GetNamespace()).Patch(ctx, a.GetName(), types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// counts are the Agent's calls and denials: those it had when this
// process took it, plus those counted since.
func (c *Controller) counts(a *unstructured.Unstructured) (int64, int64) {
	c.mu.Lock()
	b, ok := c.base[a.GetUID()]
	if !ok {
		b.calls, _, _ = unstructured.NestedInt64(a.Object, "status", "calls")
		b.denials, _, _ = unstructured.NestedInt64(a.Object, "status", "denials")
		// A new Agent of an old name starts from zero: forget the old one's calls.
		c.counter.reset(a.GetName())
		c.base[a.GetUID()] = b
	}
	c.mu.Unlock()
	calls, denials := c.counter.get(a.GetName())
	return b.calls + calls, b.denials + denials
}

// podPhase maps a pod's phase to the Agent's.
func podPhase(p string) string {
	switch p {
	case string(corev1.PodRunning):
		return PhaseRunning
	case string(corev1.PodPending), "missing":
		return PhasePending
	case string(corev1.PodFailed), string(corev1.PodSucceeded):
		return PhaseFailed
	}
	return PhaseUnknown
}

func sameStatus(old, st map[string]any) bool {
	if len(old) != len(st) {
		return false
	}
	for k, v := range st {
		if fmt.Sprint(old[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

func bound(s string) string {
	if len(s) <= maxError {
		return s
	}
	return s[:maxError-3] + "..."
}

// Counter counts calls and denials by agent: a gateway.Observer.
type Counter struct {
	mu sync.Mutex
	n  map[string]*counts
}

type counts struct{ calls, denials int64 }

// ObserveCall implements gateway.Observer.
func (c *Counter) ObserveCall(s gateway.CallStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n[s.Agent]
	if n == nil {
		n = &counts{}
		c.n[s.Agent] = n
	}
	n.calls++
	if s.Decision == "deny" {
		n.denials++
	}
}

func (c *Counter) get(agent string) (int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.n[agent]; n != nil {
		return n.calls, n.denials
	}
	return 0, 0
}

func (c *Counter) reset(agent string) {
	c.mu.Lock()
	delete(c.n, agent)
	c.mu.Unlock()
}
