package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/auth"
)

// PinsFile is the pin store's name inside the toolgate home.
const PinsFile = "pins.json"

// ToolDef is an upstream tool's definition as the model sees it.
type ToolDef struct {
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Hash digests name, description and schema; the schema is re-encoded
// first, so formatting and key order do not count as a change.
func (d ToolDef) Hash(name string) string {
	schema := []byte(d.InputSchema)
	var v any
	if json.Unmarshal(schema, &v) == nil {
		schema, _ = json.Marshal(v)
	}
	b, _ := json.Marshal([]string{name, d.Description, string(schema)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Pin is an approved definition of one upstream tool, keyed SERVER.TOOL.
type Pin struct {
	Hash     string    `json:"hash"`
	Def      ToolDef   `json:"definition"`
	Approved time.Time `json:"approved"`
	// Seen is the live definition when it differs from the approved one (or
	// there is none, Hash empty): the tool is withheld until it is approved.
	Seen     *ToolDef  `json:"seen,omitempty"`
	SeenHash string    `json:"seenHash,omitempty"`
	SeenAt   time.Time `json:"seenAt,omitzero"`
}

// pinsGen counts changes to any pin store this process has seen, so the
// door re-checks withheld tools at once rather than at its next poll.
var pinsGen atomic.Uint64

// Pins is HOME/pins.json, shared by the daemon (which records changes it
// sees) and `toolgate tools` (which approves them). Reads re-load the file
// when it changed on disk.
type Pins struct {
	path string
	mu   sync.Mutex
	m    map[string]*Pin
	stat os.FileInfo
}

// OpenPins opens the pin store at path; a missing file is an empty store.
func OpenPins(path string) (*Pins, error) {
	p := &Pins{path: path}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p, p.loadLocked()
}

func (p *Pins) loadLocked() error {
	fi, err := os.Stat(p.path)
	if errors.Is(err, os.ErrNotExist) {
		p.m, p.stat = map[string]*Pin{}, nil
		return nil
	}
	if err != nil {
		return err
	}
	if p.stat != nil && os.SameFile(fi, p.stat) && fi.ModTime().Equal(p.stat.ModTime()) && fi.Size() == p.stat.Size() {
		return nil
	}
	b, err := os.ReadFile(p.path)
	if err != nil {
		return err
	}
	m, err := parsePins(b)
	if err != nil {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	p.m, p.stat = m, fi
	pinsGen.Add(1)
	return nil
}

func parsePins(b []byte) (map[string]*Pin, error) {
	m := map[string]*Pin{}
	if len(b) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// All returns a copy of every pin.
func (p *Pins) All() (map[string]Pin, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.loadLocked(); err != nil {
		return nil, err
	}
	out := make(map[string]Pin, len(p.m))
	for k, v := range p.m {
		out[k] = *v
	}
	return out, nil
}

// Get returns the pin of SERVER.TOOL.
func (p *Pins) Get(name string) (Pin, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.loadLocked(); err != nil {
		return Pin{}, false, err
	}
	pin, ok := p.m[name]
	if !ok {
		return Pin{}, false, nil
	}
	return *pin, true, nil
}

func (p *Pins) edit(change func(m map[string]*Pin) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := auth.EditFile(p.path, func(old []byte) ([]byte, error) {
		m, err := parsePins(old)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.path, err)
		}
		if err := change(m); err != nil {
			return nil, err
		}
		b, err := json.MarshalIndent(m, "", "  ")
		return append(b, '\n'), err
	})
	if err != nil {
		return err
	}
	p.stat = nil
	return p.loadLocked()
}

// Approve pins def as the approved definition of SERVER.TOOL.
func (p *Pins) Approve(name string, def ToolDef) error {
	return p.edit(func(m map[string]*Pin) error {
		m[name] = &Pin{Hash: def.Hash(name), Def: def, Approved: time.Now().UTC()}
		return nil
	})
}

// ApproveSeen approves the definition last seen for SERVER.TOOL (what
// `toolgate tools approve` does after the daemon reported a change).
func (p *Pins) ApproveSeen(name string) error {
	return p.edit(func(m map[string]*Pin) error {
		pin, ok := m[name]
		if !ok || pin.Seen == nil {
			return fmt.Errorf("%s: no new definition to approve (is the name SERVER.TOOL, and has the upstream been seen?)", name)
		}
		m[name] = &Pin{Hash: pin.SeenHash, Def: *pin.Seen, Approved: time.Now().UTC()}
		return nil
	})
}

// Observe records the live definition of SERVER.TOOL and reports whether it
// matches the approved one. A mismatch (or a tool never approved) is written
// to the file once, for `toolgate tools list` to show.
func (p *Pins) Observe(name string, def ToolDef) (approved bool, err error) {
	h := def.Hash(name)
	pin, ok, err := p.Get(name)
	if err != nil {
		return false, err
	}
	if ok && pin.Hash == h {
		if pin.Seen == nil {
			return true, nil
		}
		// The upstream went back to the approved definition.
		return true, p.edit(func(m map[string]*Pin) error {
			if q := m[name]; q != nil {
				q.Seen, q.SeenHash, q.SeenAt = nil, "", time.Time{}
			}
			return nil
		})
	}
	if ok && pin.SeenHash == h {
		return false, nil // already reported
	}
	return false, p.edit(func(m map[string]*Pin) error {
		q := m[name]
		if q == nil {
			q = &Pin{}
			m[name] = q
		}
		q.Seen, q.SeenHash, q.SeenAt = &def, h, time.Now().UTC()
		return nil
	})
}
