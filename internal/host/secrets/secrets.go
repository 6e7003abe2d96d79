// Package secrets holds the host-side secrets that plugin handlers use. A
// secret is read once when the store is loaded, is scoped to (agent, tool)
// pairs, and is never put into an error message: everything this package
// reports names secrets, never shows their values.
package secrets

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/toolgate/toolgate/internal/host/config"
)

// FileName is the secrets file in the toolgate home directory.
const FileName = "secrets.yaml"

// Redacted replaces a secret value wherever one would be shown; the audit
// Bounder uses the same marker.
const Redacted = "[REDACTED]"

// minLen is the shortest value accepted: shorter ones cannot be redacted
// without mangling ordinary text (the audit Bounder ignores them too).
const minLen = 4

// maxFileBytes bounds secrets.yaml and secret files: far above any real one.
const maxFileBytes = 1 << 20

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,99}$`) })

// Store is a loaded set of secrets. The zero value and nil hold none.
type Store struct {
	defs     map[string]*secret
	values   []string // longest first
	replacer *strings.Replacer
}

type secret struct {
	value         string
	agents, tools []string
}

// Load builds the store from HOME/secrets.yaml (optional; it must be 0600 or
// stricter and owned by the gateway's user) and the definitions of the
// config file, which may only reference env vars and files. A name defined
// in both is an error.
func Load(home string, fromConfig map[string]config.Secret) (*Store, error) {
	if err := Validate(fromConfig); err != nil {
		return nil, err
	}
	defs := maps.Clone(fromConfig)
	if defs == nil {
		defs = map[string]config.Secret{}
	}
	path := filepath.Join(home, FileName)
	data, err := readPrivate(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		file, err := Parse(path, data)
		if err != nil {
			return nil, err
		}
		var errs []error
		for _, name := range slices.Sorted(maps.Keys(file)) {
			if _, dup := defs[name]; dup {
				errs = append(errs, fmt.Errorf("%s: secret %q is also defined in the config file", path, name))
			}
			defs[name] = file[name]
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	return New(home, defs)
}

// New resolves definitions (literal values allowed) into a store. Relative
// file paths are taken relative to home. Every source must yield a value of
// at least 4 bytes.
func New(home string, defs map[string]config.Secret) (*Store, error) {
	if err := check(defs, true); err != nil {
		return nil, err
	}
	s := &Store{defs: make(map[string]*secret, len(defs))}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		d := defs[name]
		v, err := source(home, d)
		if err == nil && len(v) < minLen {
			err = fmt.Errorf("shorter than %d bytes, too short to be redacted reliably", minLen)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("secret %q: %w", name, err))
			continue
		}
		s.defs[name] = &secret{value: v, agents: d.Agents, tools: d.Tools}
		s.values = append(s.values, v)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Longest first, so a value containing another is redacted whole.
	sort.SliceStable(s.values, func(i, j int) bool { return len(s.values[i]) > len(s.values[j]) })
	s.values = slices.Compact(s.values)
	pairs := make([]string, 0, 2*len(s.values))
	for _, v := range s.values {
		pairs = append(pairs, v, Redacted)
	}
	s.replacer = strings.NewReplacer(pairs...)
	return s, nil
}

// Validate checks secret definitions from the config file: a known name,
// exactly one source, and no literal value (the config file is not kept
// private; literal values go in secrets.yaml).
func Validate(defs map[string]config.Secret) error { return check(defs, false) }

func check(defs map[string]config.Secret, allowValue bool) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		d, path := defs[name], "secrets."+name
		if !nameRE().MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: secret names are letters, digits, _, . or -, starting with a letter or _", path))
		}
		n := 0
		for _, set := range []bool{d.Value != "", d.Env != "", d.File != ""} {
			if set {
				n++
			}
		}
		switch {
		case d.Value != "" && !allowValue:
			errs = append(errs, fmt.Errorf("%s.value: literal values belong in HOME/%s (mode 0600); reference an env var or a file here", path, FileName))
		case n != 1:
			errs = append(errs, fmt.Errorf("%s: set exactly one of value, env, file", path))
		}
		for field, list := range map[string][]string{"agents": d.Agents, "tools": d.Tools} {
			if slices.Contains(list, "") {
				errs = append(errs, fmt.Errorf("%s.%s: empty name", path, field))
			}
		}
	}
	return errors.Join(errs...)
}

func source(home string, d config.Secret) (string, error) {
	switch {
	case d.Env != "":
		v, ok := os.LookupEnv(d.Env)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", d.Env)
		}
		return v, nil
	case d.File != "":
		p := d.File
		if !filepath.IsAbs(p) {
			p = filepath.Join(home, p)
		}
		data, err := readLimited(p)
		if err != nil {
			return "", err
		}
		v := strings.TrimSuffix(string(data), "\n")
		return strings.TrimSuffix(v, "\r"), nil
	default:
		return d.Value, nil
	}
}

// readPrivate reads a file that only its owner, the gateway's user, may read.
// The checks run on the opened file, so a swapped path cannot slip through.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %04o lets other users read secrets; run chmod 600 %s", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s: owned by uid %d, not by the gateway's user (uid %d)", path, st.Uid, os.Geteuid())
	}
	return readAll(f, path)
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path)
}

func readAll(f *os.File, path string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileBytes)
	}
	return data, nil
}

// Resolve returns the value of secret name for a call of tool by agent.
// A secret grants nothing unless both lists name the caller (or "*").
func (s *Store) Resolve(agent, tool, name string) (string, error) {
	var d *secret
	if s != nil {
		d = s.defs[name]
	}
	switch {
	case d == nil:
		// The likeliest cause: set after the gateway read its secrets.
		return "", fmt.Errorf("secret %q is not defined (HOME/secrets.yaml or the config's secrets, as the gateway read them when it started or last reloaded)", name)
	case !granted(d.agents, agent) || !granted(d.tools, tool):
		return "", fmt.Errorf("secret %q is not available to agent %q with tool %q (see its agents/tools lists)", name, agent, tool)
	}
	return d.value, nil
}

func granted(list []string, who string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, who)
}

// Has reports whether secret name is defined, whoever may use it.
func (s *Store) Has(name string) bool {
	return s != nil && s.defs[name] != nil
}

// Values returns every secret value, longest first, for redaction (e.g.
// the audit Bounder's AddSecrets).
func (s *Store) Values() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.values)
}

// Redact replaces every secret value in str with Redacted.
func (s *Store) Redact(str string) string {
	if s == nil || s.replacer == nil || len(s.values) == 0 {
		return str
	}
	return s.replacer.Replace(str)
}
