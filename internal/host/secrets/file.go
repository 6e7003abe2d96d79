package secrets

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/host/config"
)

// Parse decodes a secrets file:
//
//	secrets:
//	  gh_token: {value: "…", agents: [demo], tools: [gh]}
//	  deploy:   {file: keys/deploy, agents: ["*"], tools: [git]}
//
// Decoding is strict (unknown keys, wrong types and duplicates are errors
// with their line), and no error ever quotes a value from the file: yaml's
// own type errors would.
func Parse(name string, data []byte) (map[string]config.Secret, error) {
	p := &parser{file: name}
	var doc yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return map[string]config.Secret{}, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %s", name, syntaxMessage(err))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: only one YAML document is allowed", name)
	}
	out := map[string]config.Secret{}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	p.pairs(root, "", func(key string, val *yaml.Node) {
		if key != "secrets" {
			p.errorf(val, key, "unknown field (the file holds one mapping, secrets)")
			return
		}
		p.pairs(val, "secrets", func(sname string, sval *yaml.Node) {
			out[sname] = p.secret(sval, "secrets."+sname)
		})
	})
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	if err := check(out, true); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

type parser struct {
	file string
	errs []error
}

func (p *parser) errorf(n *yaml.Node, path, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s: %s", p.file, n.Line, path, fmt.Sprintf(format, args...)))
}

// pairs walks a mapping with plain string keys. Aliases are refused: a
// secrets file has no use for them, and they would allow expansion bombs.
func (p *parser) pairs(n *yaml.Node, path string, fn func(string, *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, or(path, "document"), "expected a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge":
			p.errorf(k, or(path, "document"), "keys must be plain names")
		case v.Kind == yaml.AliasNode:
			p.errorf(v, join(path, k.Value), "aliases are not allowed")
		case seen[k.Value]:
			p.errorf(k, join(path, k.Value), "defined twice")
		default:
			seen[k.Value] = true
			fn(k.Value, v)
		}
	}
}

func (p *parser) secret(n *yaml.Node, path string) config.Secret {
	var s config.Secret
	p.pairs(n, path, func(key string, v *yaml.Node) {
		fp := path + "." + key
		switch key {
		case "value":
			s.Value = p.str(v, fp)
		case "env":
			s.Env = p.str(v, fp)
		case "file":
			s.File = p.str(v, fp)
		case "agents":
			s.Agents = p.list(v, fp)
		case "tools":
			s.Tools = p.list(v, fp)
		default:
			p.errorf(v, fp, "unknown field (known: value, env, file, agents, tools)")
		}
	})
	return s
}

func (p *parser) str(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.errorf(n, path, "expected a string")
		return ""
	}
	return n.Value
}

func (p *parser) list(n *yaml.Node, path string) []string {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, path, "expected a list of names")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		out = append(out, p.str(c, fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): `) })

// syntaxMessage keeps only the line of a YAML syntax error: the parser's
// text may quote the file, which is full of secrets.
func syntaxMessage(err error) string {
	if m := yamlLine().FindStringSubmatch(err.Error()); m != nil {
		return "line " + m[1] + ": invalid YAML"
	}
	return "invalid YAML"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
