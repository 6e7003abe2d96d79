package hookserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// StateFile is the default name, in HOME, of the saved dedup state.
const StateFile = "hooks-seen.json"

// stateTempPrefix names the temporary file a save writes before renaming it
// over the state; a crash can leave one, which the next start removes.
const stateTempPrefix = ".hooks-seen-"

// saveInterval is how often a changed dedup state is saved. A crash loses
// at most this much, and the next start reads it back from the log: the
// state names the log position it is complete up to.
var saveInterval = time.Second

// state is the saved form of the dedup memory: the ids recorded per agent,
// oldest first, and the audit log position up to which it is complete.
type state struct {
	Position audit.Position      `json:"position"`
	Agents   map[string][]seenID `json:"agents"`
}

type seenID struct {
	ID string `json:"id"`
	At int64  `json:"at"` // unix seconds when recorded; ids older than the window are dropped
}

// loadSeen fills s.seen: from the saved state and the log entries after its
// position, so start-up reads only what was written since the last save;
// from the whole window of the log when there is no usable state.
func (s *Server) loadSeen() error {
	since := time.Now().Add(-s.opts.DedupWindow)
	if s.opts.StatePath != "" {
		removeTemps(filepath.Dir(s.opts.StatePath), s.opts.Logger)
		st, err := readState(s.opts.StatePath)
		switch {
		case err == nil && st != nil:
			for agent, ids := range st.Agents {
				for _, id := range ids {
					if id.At >= since.Unix() {
						s.seen.add(agent, id.ID, id.At)
					}
				}
			}
			if s.opts.AuditDir == "" {
				return nil
			}
			err = audit.ScanAfter(s.opts.AuditDir, st.Position, s.remember)
			if !errors.Is(err, audit.ErrPositionNotFound) {
				return err
			}
			s.opts.Logger.Warn("hookserver: the saved dedup state names a log position that is gone; reading the log", "state", s.opts.StatePath)
		case err != nil:
			s.opts.Logger.Warn("hookserver: dedup state unreadable; reading the log instead", "err", err)
		}
	}
	if s.opts.AuditDir == "" {
		return nil
	}
	return audit.Query(s.opts.AuditDir, audit.Filter{Since: since}, s.remember)
}

// remember notes the id of an entry this package wrote.
func (s *Server) remember(e *gateway.Entry) error {
	if id := recordedID(e); id != "" {
		s.seen.add(e.Agent, id, e.TS.Unix())
	}
	return nil
}

func readState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &st, nil
}

// removeTemps deletes temporary state files a crash left in dir.
func removeTemps(dir string, log interface{ Warn(string, ...any) }) {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), stateTempPrefix) && de.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, de.Name())); err != nil {
				log.Warn("hookserver: leftover temporary state file not removed", "file", de.Name(), "err", err)
			}
		}
	}
}

// saveLoop saves the state every saveInterval while it changes, until
// stop is closed.
func (s *Server) saveLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(saveInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := s.save(); err != nil {
				s.opts.Logger.Warn("hookserver: saving the dedup state failed; trying again", "err", err)
			}
		}
	}
}

// save writes the state when it changed. It needs a moment with no record
// in flight: then every id whose entry is durable is in memory, and the
// log position read now is one the state is complete up to.
func (s *Server) save() error {
	s.mu.Lock()
	if !s.dirty || len(s.inflight) > 0 {
		s.mu.Unlock()
		return nil
	}
	st := state{Position: s.opts.Position(), Agents: s.seen.snapshot()}
	s.dirty = false
	s.mu.Unlock()
	if err := writeAtomic(s.opts.StatePath, st); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return err
	}
	return nil
}

// writeAtomic replaces path with v's JSON: a reader sees the old file or
// the new one, never half of one.
func writeAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), stateTempPrefix)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// recent remembers, per agent, the last n event ids recorded: kept apart,
// so one agent's flood of events cannot push another's ids out and make
// that agent's redeliveries count twice.
type recent struct {
	n      int
	agents map[string]*idRing
}

// idRing is a set of the last n ids added.
type idRing struct {
	set  map[string]struct{}
	ring []seenID
	next int
}

func newRecent(n int) *recent { return &recent{n: n, agents: map[string]*idRing{}} }

func (r *recent) has(agent, id string) bool {
	ids := r.agents[agent]
	if ids == nil {
		return false
	}
	_, ok := ids.set[id]
	return ok
}

func (r *recent) add(agent, id string, at int64) {
	ids := r.agents[agent]
	if ids == nil {
		ids = &idRing{set: map[string]struct{}{}}
		r.agents[agent] = ids
	}
	if _, ok := ids.set[id]; ok {
		return
	}
	if len(ids.ring) < r.n {
		ids.ring = append(ids.ring, seenID{ID: id, At: at})
	} else {
		delete(ids.set, ids.ring[ids.next].ID)
		ids.ring[ids.next] = seenID{ID: id, At: at}
		ids.next = (ids.next + 1) % r.n
	}
	ids.set[id] = struct{}{}
}

// snapshot copies the ids, oldest first per agent.
func (r *recent) snapshot() map[string][]seenID {
	out := make(map[string][]seenID, len(r.agents))
	for agent, ids := range r.agents {
		out[agent] = append(append(make([]seenID, 0, len(ids.ring)), ids.ring[ids.next:]...), ids.ring[:ids.next]...)
	}
	return out
}
