package modeldoor

import (
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/model"
)

// Meter counts what each agent spends through the model door, in memory:
// requests of the last minute, tokens and cost per minute of the last day.
// The daemon owns one for its lifetime, so the counts survive a reload;
// a restart starts them afresh.
type Meter struct {
	mu     sync.Mutex
	agents map[string]*agentMeter
}

const dayMinutes = 24 * 60

type agentMeter struct {
	requests []time.Time // of the last minute, oldest first
	minutes  [dayMinutes]minuteTotal
}

type minuteTotal struct {
	minute int64 // Unix minute this slot holds; another minute's totals are stale
	tokens int64
	cost   float64
}

// NewMeter returns an empty meter.
func NewMeter() *Meter { return &Meter{agents: map[string]*agentMeter{}} }

func (m *Meter) agent(name string) *agentMeter {
	a := m.agents[name]
	if a == nil {
		a = &agentMeter{}
		m.agents[name] = a
	}
	return a
}

// Spent is what agent used in each budget window up to now.
func (m *Meter) Spent(agent string, now time.Time) model.Spent {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.agent(agent)
	a.prune(now)
	s := model.Spent{Requests1m: len(a.requests)}
	if len(a.requests) > 0 {
		s.RetryAfter = max(a.requests[0].Add(time.Minute).Sub(now), 0)
	}
	cur := now.Unix() / 60
	for _, t := range a.minutes {
		age := cur - t.minute
		if age < 0 || age >= dayMinutes || (t.tokens == 0 && t.cost == 0) {
			continue
		}
		s.Tokens1d += t.tokens
		s.Cost1d += t.cost
		if age < 60 {
			s.Tokens1h += t.tokens
			s.Cost1h += t.cost
		}
	}
	return s
}

// Request counts one request the door forwards.
func (m *Meter) Request(agent string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.agent(agent)
	a.prune(now)
	a.requests = append(a.requests, now)
}

// Add counts the tokens and cost of an answer.
func (m *Meter) Add(agent string, now time.Time, tokens int64, cost float64) {
	if tokens == 0 && cost == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	minute := now.Unix() / 60
	t := &m.agent(agent).minutes[minute%dayMinutes]
	if t.minute != minute {
		*t = minuteTotal{minute: minute}
	}
	t.tokens += tokens
	t.cost += cost
}

func (a *agentMeter) prune(now time.Time) {
	i := 0
	for i < len(a.requests) && now.Sub(a.requests[i]) >= time.Minute {
		i++
	}
	a.requests = a.requests[i:]
}
