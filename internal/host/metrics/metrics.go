// Package metrics exposes the gateway's numbers in the Prometheus text
// format (/metrics): calls by agent, kind, tool and decision; latency of
// each phase of a call; sandboxes by state; egress connections and bytes;
// model tokens and cost; the audit writer's work and the index's lag.
//
// Label values come only from the configuration (agents, tools, model
// providers, model names): a name a request or an answer made up is counted
// under "unknown" (a model under "other"), so nobody can grow the series
// without bound.
package metrics

import (
	"context"
	"net/http"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

// Sources are read at scrape time.
type Sources struct {
	// Known says whether an agent and a tool of a kind are in the
	// configuration (a model call's tool is its provider).
	Known func(agent string, kind gateway.Kind, tool string) (agentOK, toolOK bool)
	// Models are the model names and path.Match patterns the configuration
	// lists (price tables, allowlists), sorted: the model label's values.
	Models func() []string
	// Sandboxes counts the agents' sandboxes by state (running, starting,
	// missing …) and, by agent, the calls waiting for their turn in each.
	Sandboxes func(ctx context.Context) (byState, waiting map[string]int)
	// Audit reports the writer's entries and fsyncs since start.
	Audit func() (entries, syncs uint64)
	// IndexLag is how long the audit index has been behind the log (0 when
	// caught up; −1 when there is no index).
	IndexLag func() time.Duration
	// PostgresLag is the same for the fleet database (−1: not configured).
	PostgresLag func() time.Duration
}

// Metrics implements gateway.Observer and serves /metrics.
type Metrics struct {
	reg     *prometheus.Registry
	src     Sources
	calls   *prometheus.CounterVec
	phase   *prometheus.HistogramVec
	egress  *prometheus.CounterVec
	tokens  *prometheus.CounterVec
	cost    *prometheus.CounterVec
	failing *prometheus.CounterVec
}

var _ gateway.Observer = (*Metrics)(nil)

// New registers the gateway's metrics.
func New(src Sources) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), src: src}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_calls_total",
		Help: "Calls decided, by agent, kind, tool and decision."}, []string{"agent", "kind", "tool", "decision"})
	m.failing = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_call_failures_total",
		Help: "Allowed calls that failed to run (an error, not an exit code)."}, []string{"agent", "kind", "tool"})
	m.phase = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolgate_call_phase_seconds",
		Help:    "Time of each phase of a call: decide (prepare, policy, approval), audit (the decision made durable), execute.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60}},
		[]string{"phase", "kind"})
	m.egress = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_egress_bytes_total",
		Help: "Bytes through egress tunnels, by agent and direction."}, []string{"agent", "direction"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_model_tokens_total",
		Help: "Model tokens through the model door, by agent, model and type (input, output, cache_read, cache_write)."},
		[]string{"agent", "model", "type"})
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_model_cost_usd_total",
		Help: "Model cost through the model door in US dollars (the price table's), by agent and model."}, []string{"agent", "model"})
	m.reg.MustRegister(m.calls, m.failing, m.phase, m.egress, m.tokens, m.cost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), &scrape{m})
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Timeout: 5 * time.Second})
}

// ObserveCall implements gateway.Observer.
func (m *Metrics) ObserveCall(c gateway.CallStats) {
	agent, tool := m.labels(c.Agent, c.Kind, c.Tool)
	kind := string(c.Kind)
	if kind == "" {
		kind = string(gateway.KindTool)
	}
	m.calls.WithLabelValues(agent, kind, tool, c.Decision).Inc()
	m.phase.WithLabelValues("decide", kind).Observe(c.Decide.Seconds())
	if c.Record > 0 {
		m.phase.WithLabelValues("audit", kind).Observe(c.Record.Seconds())
	}
	if c.Decision != "allow" {
		return
	}
	m.phase.WithLabelValues("execute", kind).Observe(c.Execute.Seconds())
	if c.Failed {
		m.failing.WithLabelValues(agent, kind, tool).Inc()
	}
	switch c.Kind {
	case gateway.KindEgress:
		m.egress.WithLabelValues(agent, "up").Add(number(c.Detail["bytesUp"]))
		m.egress.WithLabelValues(agent, "down").Add(number(c.Detail["bytesDown"]))
	case gateway.KindModel:
		m.model(agent, c.Detail)
	}
}

// model counts the usage a model call's detail carries (internal/host/door/modeldoor
// records inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens,
// costUSD).
func (m *Metrics) model(agent string, d map[string]any) {
	name, _ := d["model"].(string)
	var configured []string
	if m.src.Models != nil {
		configured = m.src.Models()
	}
	model := modelLabel(configured, name)
	for _, k := range [][2]string{{"inputTokens", "input"}, {"outputTokens", "output"}, {"cacheReadTokens", "cache_read"}, {"cacheWriteTokens", "cache_write"}} {
		if n := number(d[k[0]]); n > 0 {
			m.tokens.WithLabelValues(agent, model, k[1]).Add(n)
		}
	}
	if c := number(d["costUSD"]); c > 0 {
		m.cost.WithLabelValues(agent, model).Add(c)
	}
}

// modelLabel is the label of a model name, which the agent's request or the
// provider's answer chose: the name when the configuration lists it, else
// the longest configured pattern it matches (the one a price is looked up
// by), else "other".
func modelLabel(configured []string, name string) string {
	best := ""
	for _, c := range configured {
		if c == name {
			return name
		}
		if ok, _ := path.Match(c, name); ok && len(c) > len(best) {
			best = c
		}
	}
	if best == "" {
		return "other"
	}
	return best
}

func (m *Metrics) labels(agent string, kind gateway.Kind, tool string) (string, string) {
	aok, tok := false, false
	if m.src.Known != nil {
		aok, tok = m.src.Known(agent, kind, tool)
	}
	if !aok {
		agent = "unknown"
	}
	if !tok {
		tool = "unknown"
	}
	return agent, tool
}

func number(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case uint64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// scrape collects the values read at scrape time.
type scrape struct{ m *Metrics }

var (
	sandboxesDesc = prometheus.NewDesc("toolgate_sandboxes", "Agents' sandboxes by state.", []string{"state"}, nil)
	waitingDesc   = prometheus.NewDesc("toolgate_sandbox_calls_waiting", "Calls waiting for their turn in the agent's sandbox (first come, first served; 8 at once per CPU of its share).", []string{"agent"}, nil)
	auditDesc     = prometheus.NewDesc("toolgate_audit_entries_total", "Entries the audit writer made durable since start.", nil, nil)
	syncsDesc     = prometheus.NewDesc("toolgate_audit_syncs_total", "fsyncs of the audit log since start (entries/syncs is the group-commit factor).", nil, nil)
	lagDesc       = prometheus.NewDesc("toolgate_audit_index_lag_seconds", "How long the query index has been behind the audit log (0: caught up, -1: no index).", nil, nil)
	pgLagDesc     = prometheus.NewDesc("toolgate_audit_postgres_lag_seconds", "How long the fleet database has been behind the audit log (0: caught up, -1: not configured).", nil, nil)
)

func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- waitingDesc
	ch <- auditDesc
	ch <- syncsDesc
	ch <- lagDesc
	ch <- pgLagDesc
}

func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	src := s.m.src
	if src.Sandboxes != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		byState, waiting := src.Sandboxes(ctx)
		for state, n := range byState {
			ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), state)
		}
		for agent, n := range waiting {
			ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(n), agent)
		}
		cancel()
	}
	if src.Audit != nil {
		e, y := src.Audit()
		ch <- prometheus.MustNewConstMetric(auditDesc, prometheus.CounterValue, float64(e))
		ch <- prometheus.MustNewConstMetric(syncsDesc, prometheus.CounterValue, float64(y))
	}
	if src.IndexLag != nil {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, src.IndexLag().Seconds())
	}
	if src.PostgresLag != nil {
		ch <- prometheus.MustNewConstMetric(pgLagDesc, prometheus.GaugeValue, src.PostgresLag().Seconds())
	}
}
