package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
)

// Skills live in directories NAME/SKILL.md: globally under HOME/skills, per
// agent under HOME/agents/AGENT/skills. Each is the resource
// skill://global/NAME or skill://AGENT/NAME.
const (
	SkillScheme   = "skill"
	GlobalScope   = "global"
	SkillFile     = "SKILL.md"
	MaxSkillBytes = 1 << 20
)

// validName is what a skill or agent directory must be called to be served:
// it keeps URIs plain and rules out "..", hidden files and separators.
var validName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`) })

// SkillMeta is a skill's front matter.
type SkillMeta struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// ParseSkill reads the front matter of a SKILL.md: a first line "---", YAML
// with name and description, a line "---", then the body. Other front matter
// keys are allowed and ignored.
func ParseSkill(b []byte) (SkillMeta, error) {
	var m SkillMeta
	if !utf8.Valid(b) {
		return m, errors.New("not valid UTF-8")
	}
	b = bytes.TrimPrefix(b, []byte("\uFEFF"))
	text := strings.ReplaceAll(string(b), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return m, errors.New("no front matter: the file must start with a line \"---\"")
	}
	var yml string
	if strings.HasPrefix(rest, "---\n") || rest == "---" {
		yml = ""
	} else if i := strings.Index(rest, "\n---\n"); i >= 0 {
		yml = rest[:i]
	} else if strings.HasSuffix(rest, "\n---") {
		yml = strings.TrimSuffix(rest, "\n---")
	} else {
		return m, errors.New("front matter is not closed by a line \"---\"")
	}
	if err := yaml.Unmarshal([]byte(yml), &m); err != nil {
		return SkillMeta{}, fmt.Errorf("front matter: %v", err)
	}
	switch {
	case strings.TrimSpace(m.Name) == "":
		return m, errors.New("front matter has no name")
	case strings.TrimSpace(m.Description) == "":
		return m, errors.New("front matter has no description")
	}
	return m, nil
}

// skillRecord is one skill as last scanned.
type skillRecord struct {
	URI     string
	Scope   string // "global" or the agent
	Name    string // directory name
	Root    string // the skills directory; reads stay inside it
	Meta    SkillMeta
	Err     string // why the skill is broken, shown in its description
	Size    int64
	ModTime time.Time
}

func (r *skillRecord) resource() *sdk.Resource {
	res := &sdk.Resource{URI: r.URI, Name: r.Name, Title: r.Meta.Name, Description: r.Meta.Description,
		MIMEType: "text/markdown", Size: r.Size}
	if r.Err != "" {
		res.Description = "error: " + r.Err
	}
	return res
}

// read returns the skill's current text. It opens the file inside the
// skills directory, so a symlink cannot lead the read elsewhere.
func (r *skillRecord) read() (string, error) {
	f, err := os.OpenInRoot(r.Root, filepath.Join(r.Name, SkillFile))
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", r.URI, unwrapPath(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSkillBytes+1))
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", r.URI, unwrapPath(err))
	}
	if len(b) > MaxSkillBytes {
		return "", fmt.Errorf("skill %s is over %d bytes", r.URI, MaxSkillBytes)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("skill %s is not valid UTF-8", r.URI)
	}
	return string(b), nil
}

// unwrapPath keeps host paths out of errors sent to clients.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// skillSet scans the skills directories.
type skillSet struct {
	home string
	log  *slog.Logger
	mu   sync.Mutex
	recs map[string]*skillRecord // by URI
}

func newSkillSet(home string, log *slog.Logger) *skillSet {
	return &skillSet{home: home, log: log, recs: map[string]*skillRecord{}}
}

func (s *skillSet) current() map[string]*skillRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recs
}

// scan re-reads what changed on disk (by size and mtime) and returns the
// skills whose content changed; added and removed ones show in current().
func (s *skillSet) scan() (changed []*skillRecord) {
	if s.home == "" {
		return nil
	}
	s.mu.Lock()
	old := s.recs
	s.mu.Unlock()
	recs := map[string]*skillRecord{}
	s.scanDir(filepath.Join(s.home, "skills"), GlobalScope, old, recs)
	agents, _ := os.ReadDir(filepath.Join(s.home, "agents"))
	for _, a := range agents {
		if !a.IsDir() || !validName().MatchString(a.Name()) || a.Name() == GlobalScope {
			continue
		}
		s.scanDir(filepath.Join(s.home, "agents", a.Name(), "skills"), a.Name(), old, recs)
	}
	for uri, r := range recs {
		if o, ok := old[uri]; ok && o != r {
			changed = append(changed, r)
		}
	}
	s.mu.Lock()
	s.recs = recs
	s.mu.Unlock()
	return changed
}

func (s *skillSet) scanDir(dir, scope string, old, into map[string]*skillRecord) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // no skills here
	}
	for _, e := range entries {
		name := e.Name()
		if !validName().MatchString(name) {
			if !strings.HasPrefix(name, ".") {
				s.log.Warn("skill directory name not served", "dir", dir, "name", name)
			}
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, name, SkillFile))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		uri := SkillScheme + "://" + scope + "/" + name
		if o, ok := old[uri]; ok && o.Size == fi.Size() && o.ModTime.Equal(fi.ModTime()) {
			into[uri] = o
			continue
		}
		r := &skillRecord{URI: uri, Scope: scope, Name: name, Root: dir, Size: fi.Size(), ModTime: fi.ModTime()}
		if text, err := r.read(); err != nil {
			r.Err = err.Error()
		} else if r.Meta, err = ParseSkill([]byte(text)); err != nil {
			r.Err = err.Error()
		}
		if r.Err != "" {
			s.log.Warn("skill is broken; listed with its error", "uri", uri, "err", r.Err)
		}
		into[uri] = r
	}
}

// Skill is one skill as the door lists it to an agent.
type Skill struct {
	URI, Name, Description string
}

// Skills lists the skills agent sees, as resources/list shows them to it
// (a broken skill with its error as description), sorted by URI.
func (d *Door) Skills(agent string) []Skill {
	idd := &identityDoor{id: Identity{Agent: agent}}
	var out []Skill
	for _, r := range d.skills.current() {
		if idd.sees(r) {
			res := r.resource()
			out = append(out, Skill{URI: res.URI, Name: res.Name, Description: res.Description})
		}
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.URI, b.URI) })
	return out
}

// ReadSkill reads a skill agent sees, as resources/read gives it.
func (d *Door) ReadSkill(agent, uri string) (string, error) {
	r, ok := d.skills.current()[uri]
	if !ok || !(&identityDoor{id: Identity{Agent: agent}}).sees(r) {
		return "", fmt.Errorf("no skill %s", uri)
	}
	return r.read()
}

// sees reports whether the identity is shown the skill.
func (idd *identityDoor) sees(r *skillRecord) bool {
	return r.Scope == GlobalScope || (idd.id.Agent != "" && r.Scope == idd.id.Agent)
}

// syncSkills registers exactly the skills the identity sees in cur.
func (d *Door) syncSkills(idd *identityDoor, cur map[string]*skillRecord) {
	idd.mu.Lock()
	defer idd.mu.Unlock()
	var gone []string
	for uri := range idd.res {
		if r, ok := cur[uri]; !ok || !idd.sees(r) {
			gone = append(gone, uri)
			delete(idd.res, uri)
		}
	}
	if len(gone) > 0 {
		idd.server.RemoveResources(gone...)
	}
	for uri, r := range cur {
		if !idd.sees(r) || idd.res[uri] == r {
			continue
		}
		idd.res[uri] = r
		idd.server.AddResource(r.resource(), readSkill(r))
	}
}

func readSkill(r *skillRecord) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		text, err := r.read()
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: r.URI, MIMEType: "text/markdown", Text: text}}}, nil
	}
}

// CheckSkillURI refuses resource URIs that are not plain skill URIs: other
// schemes, absolute or relative paths, "..", encoded separators.
func CheckSkillURI(uri string) error {
	u, err := url.Parse(uri)
	if err != nil {
		return fmt.Errorf("malformed resource URI: %v", err)
	}
	if u.Scheme != SkillScheme {
		return fmt.Errorf("resource URI %q: unknown scheme %q (want %s://SCOPE/NAME)", uri, u.Scheme, SkillScheme)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(uri, "..") || strings.Contains(uri, "%") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
		!validName().MatchString(u.Host) || !validName().MatchString(name) {
		return fmt.Errorf("invalid skill URI %q: want %s://SCOPE/NAME with no path traversal", uri, SkillScheme)
	}
	return nil
}

// checkResourceURIs answers requests naming a bad resource URI with a clear
// invalid-params error before any lookup.
func checkResourceURIs(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		var uri string
		switch r := req.(type) {
		case *sdk.ReadResourceRequest:
			if r.Params != nil {
				uri = r.Params.URI
			}
		case *sdk.SubscribeRequest:
			if r.Params != nil {
				uri = r.Params.URI
			}
		case *sdk.UnsubscribeRequest:
			if r.Params != nil {
				uri = r.Params.URI
			}
		default:
			return next(ctx, method, req)
		}
		if err := CheckSkillURI(uri); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		return next(ctx, method, req)
	}
}
