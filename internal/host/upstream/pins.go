package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/lib/lockedfile"
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

// Pins is HOME/pins.json, shared by the daemon (which records changes it
// sees) and `toolgate tools` (which approves them). Reads re-load the file
// when it changed on disk.
type Pins struct {
	file *lockedfile.File[map[string]*Pin]
}

// OpenPins opens the pin store at path; a missing file is an empty store.
func OpenPins(path string) (*Pins, error) {
	f, err := lockedfile.Open(path, parsePins)
	if err != nil {
		return nil, err
	}
	return &Pins{file: f}, nil
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

// Generation moves whenever the pins may have changed, so the MCP door
// re-checks withheld tools at once rather than at its next poll.
func (p *Pins) Generation() uint64 { return p.file.Loads() }

// All returns a copy of every pin.
func (p *Pins) All() (map[string]Pin, error) {
	var out map[string]Pin
	err := p.file.Read(func(m map[string]*Pin) {
		out = make(map[string]Pin, len(m))
		for k, v := range m {
			out[k] = *v
		}
	})
	return out, err
}

// Get returns the pin of SERVER.TOOL.
func (p *Pins) Get(name string) (pin Pin, ok bool, err error) {
	err = p.file.Read(func(m map[string]*Pin) {
		if q := m[name]; q != nil {
			pin, ok = *q, true
		}
	})
	return pin, ok, err
}

func (p *Pins) edit(change func(m map[string]*Pin) error) error {
	return p.file.Edit(func(m map[string]*Pin) (map[string]*Pin, error) { return m, change(m) })
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
