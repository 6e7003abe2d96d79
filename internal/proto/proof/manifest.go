package proof

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Selection is what a receipt is of: one agent's entries, those of one
// session (a session is one agent's), of one call, or since a time. Every
// entry of the receipt matches every field that is set.
type Selection struct {
	Agent   string `json:"agent"`
	Session string `json:"session,omitempty"`
	Call    string `json:"call,omitempty"`
	// Since is an RFC 3339 time: entries at or after it.
	Since string `json:"since,omitempty"`
}

// Check refuses a selection that names nothing to select by.
func (s Selection) Check() error {
	switch {
	case s.Session == "" && s.Call == "" && s.Since == "":
		return errors.New("selection: names no session, call or time")
	case (s.Session != "" || s.Since != "") && s.Agent == "":
		return errors.New("selection: a session or a time goes with an agent")
	}
	if s.Since != "" {
		if _, err := time.Parse(time.RFC3339Nano, s.Since); err != nil {
			return fmt.Errorf("selection: since: %v", err)
		}
	}
	return nil
}

// Selects reports whether the log line belongs to the selection.
func (s Selection) Selects(line []byte) bool {
	var f lineFields
	return json.Unmarshal(line, &f) == nil && s.mismatch(&f) == ""
}

// lineFields are what Match reads of a log line.
type lineFields struct {
	TS      time.Time `json:"ts"`
	ID      string    `json:"id"`
	Agent   string    `json:"agent"`
	Session string    `json:"session"`
}

// mismatch says why the log line f was read from does not belong to the
// selection, "" when it does.
func (s Selection) mismatch(f *lineFields) string {
	switch {
	case f.Agent != s.Agent:
		return fmt.Sprintf("it is agent %q's entry, not the selection's agent %q", f.Agent, s.Agent)
	case s.Session != "" && f.Session != s.Session:
		return fmt.Sprintf("it is of session %q, not the selection's %q", f.Session, s.Session)
	case s.Call != "" && f.ID != s.Call:
		return fmt.Sprintf("it is of call %s, not the selection's %s", f.ID, s.Call)
	}
	if s.Since != "" {
		since, _ := time.Parse(time.RFC3339Nano, s.Since)
		if f.TS.Before(since) {
			return fmt.Sprintf("it is from %s, before the selection's %s", f.TS.Format(time.RFC3339Nano), s.Since)
		}
	}
	return ""
}

// Manifest is the gateway's signed account of a receipt: the tree it proves
// against, the selection, and the leaf index of every entry selected, so
// an entry dropped from the receipt is missed.
type Manifest struct {
	Origin    string
	Tree      tlog.Tree
	Selection Selection
	Leaves    []int64 // increasing
}

// manifestMagic is the manifest's second line: no checkpoint parses as a
// manifest, nor a manifest as a checkpoint.
const manifestMagic = "toolgate receipt manifest v1"

// Text is the manifest's note text:
//
//	<origin>
//	toolgate receipt manifest v1
//	tree <size> <root base64>
//	selection <selection as compact JSON>
//	leaves <index> <index> …
func (m *Manifest) Text() (string, error) {
	sel, err := json.Marshal(m.Selection)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%s\ntree %d %s\nselection %s\nleaves", m.Origin, manifestMagic, m.Tree.N, m.Tree.Hash, sel)
	for _, i := range m.Leaves {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(i, 10))
	}
	b.WriteByte('\n')
	return b.String(), nil
}

// Sign returns the manifest as a note signed by signer.
func (m *Manifest) Sign(signer note.Signer) ([]byte, error) {
	text, err := m.Text()
	if err != nil {
		return nil, err
	}
	return note.Sign(&note.Note{Text: text}, signer)
}

// ParseManifest reads a manifest's note text, strictly.
func ParseManifest(text string) (*Manifest, error) {
	if !strings.HasSuffix(text, "\n") {
		return nil, errors.New("manifest: no final newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 5 || lines[1] != manifestMagic {
		return nil, errors.New("manifest: not a toolgate receipt manifest v1")
	}
	m := &Manifest{Origin: lines[0]}
	if !validOrigin(m.Origin) {
		return nil, fmt.Errorf("manifest: origin %q is not a log name", clip(m.Origin))
	}
	tree, ok := strings.CutPrefix(lines[2], "tree ")
	size, root, ok2 := strings.Cut(tree, " ")
	if !ok || !ok2 {
		return nil, errors.New("manifest: no tree line")
	}
	var err error
	if m.Tree.N, err = parseSize(size); err != nil {
		return nil, fmt.Errorf("manifest: tree size: %v", err)
	}
	if m.Tree.Hash, err = parseHash(root); err != nil {
		return nil, fmt.Errorf("manifest: tree root: %v", err)
	}
	sel, ok := strings.CutPrefix(lines[3], "selection ")
	if !ok {
		return nil, errors.New("manifest: no selection line")
	}
	dec := json.NewDecoder(strings.NewReader(sel))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m.Selection); err != nil || dec.More() {
		return nil, fmt.Errorf("manifest: selection: not one selection object (%v)", err)
	}
	leaves, ok := strings.CutPrefix(lines[4], "leaves ")
	if !ok {
		return nil, errors.New("manifest: no leaves line, or no leaf")
	}
	for _, f := range strings.Split(leaves, " ") {
		i, err := parseSize(f)
		if err != nil {
			return nil, fmt.Errorf("manifest: leaf: %v", err)
		}
		if n := len(m.Leaves); n > 0 && i <= m.Leaves[n-1] || i >= m.Tree.N {
			return nil, fmt.Errorf("manifest: leaf %d out of order or outside the tree of %d", i, m.Tree.N)
		}
		m.Leaves = append(m.Leaves, i)
	}
	if want, _ := m.Text(); want != text {
		return nil, errors.New("manifest: not in its canonical form")
	}
	return m, nil
}
