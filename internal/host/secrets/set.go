package secrets

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/host/config"
)

// ReadKey reads a secret value from r, which is the named file (or stdin)
// the operator gave. A regular file readable by other users is refused:
// the key is exposed already, and storing it would hide that. One trailing
// newline is dropped; an empty value is refused.
func ReadKey(f *os.File, name string) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s: mode %04o lets other users read the key; chmod 600 %s (and consider the key exposed)", name, fi.Mode().Perm(), name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxFileBytes {
		return "", fmt.Errorf("%s: larger than %d bytes", name, maxFileBytes)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("%s: empty: no key to store", name)
	}
	return v, nil
}

// Set stores secret name with value in HOME/secrets.yaml (created 0600,
// replaced atomically), granted to agents and tools; a secret already
// there keeps its grants when agents and tools are nil. The existing file
// must pass the checks Load makes (0600, the gateway user's, well formed).
func Set(home, name, value string, agents, tools []string) error {
	path := filepath.Join(home, FileName)
	defs := map[string]config.Secret{}
	data, err := readPrivate(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if defs, err = Parse(path, data); err != nil {
			return err
		}
	}
	s := defs[name]
	if s.Value == "" && (s.Env != "" || s.File != "") {
		s = config.Secret{Agents: s.Agents, Tools: s.Tools} // a value replaces the other source
	}
	s.Value, s.Env, s.File = value, "", ""
	if agents != nil {
		s.Agents = agents
	}
	if tools != nil {
		s.Tools = tools
	}
	defs[name] = s
	if err := check(map[string]config.Secret{name: s}, true); err != nil {
		return err
	}
	if len(value) < minLen {
		return fmt.Errorf("secret %q: shorter than %d bytes, too short to be redacted reliably", name, minLen)
	}
	out, err := encode(defs)
	if err != nil {
		return err
	}
	return writePrivate(path, out)
}

// encode renders secrets.yaml in Parse's format, names sorted.
func encode(defs map[string]config.Secret) ([]byte, error) {
	type entry struct {
		Value  string   `yaml:"value,omitempty"`
		Env    string   `yaml:"env,omitempty"`
		File   string   `yaml:"file,omitempty"`
		Agents []string `yaml:"agents,flow"`
		Tools  []string `yaml:"tools,flow"`
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		d := defs[name]
		var n yaml.Node
		if err := n.Encode(entry{Value: d.Value, Env: d.Env, File: d.File, Agents: orEmpty(d.Agents), Tools: orEmpty(d.Tools)}); err != nil {
			return nil, fmt.Errorf("encoding secret %q: %w", name, err)
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, &n)
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "secrets"}, root}}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("# toolgate host secrets: never mounted into a sandbox. Keep it 0600.\n"), out...), nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// writePrivate replaces path with data: a 0600 file beside it, synced,
// renamed over it, so a reader sees the old file or the new one whole.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secrets-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
