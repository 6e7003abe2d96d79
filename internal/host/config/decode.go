package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds how many nodes one file may expand to through aliases
// (a "billion laughs" document), far above any real configuration.
const maxNodes = 100_000

// decoder turns a yaml.Node tree into the config structs strictly: unknown
// fields, wrong types and duplicate keys are errors naming the field path and
// line, and every error is collected rather than stopping at the first.
// yaml.v3's own Node.Decode has no strict mode and reports no field paths.
type decoder struct {
	file   string
	errs   Errors
	nodes  map[string]*yaml.Node // field path → its value node, for later checks
	failed map[string]bool       // field paths already reported, not to be checked again
	budget int
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.failed[path] = true
	e := &Error{File: d.file, Field: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	d.errs = append(d.errs, e)
}

// at returns the node of a field path, or of its nearest parent present in
// the file, so a message about a defaulted field still points somewhere useful.
func (d *decoder) at(path string) *yaml.Node {
	for path != "" {
		if n := d.nodes[path]; n != nil {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return d.nodes[""]
}

// set reports whether a field was written in the file (even as zero) and
// decoded without error.
func (d *decoder) set(path string) bool {
	n := d.nodes[path]
	return n != nil && n.ShortTag() != "!!null" && !d.failed[path]
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	exampleType  = reflect.TypeFor[Example]()
)

// example decodes a rule example: a plain string is an exec command; a
// mapping is decoded strictly, its free-form args by yaml itself.
func (d *decoder) example(n *yaml.Node, ex *Example, path string) {
	ex.Line = n.Line
	if n.Kind == yaml.ScalarNode {
		ex.Command = n.Value
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "an example is a command string or a mapping (tool, kind, command, argv, path, host, port, args), got %s", describe(n))
		return
	}
	var args *yaml.Node
	rest := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "args" {
			args = n.Content[i+1]
			continue
		}
		rest.Content = append(rest.Content, n.Content[i], n.Content[i+1])
	}
	type plain Example // no example case: decode the fields as a struct
	d.structure(rest, reflect.ValueOf((*plain)(ex)).Elem(), path)
	if args != nil {
		if args.Kind != yaml.MappingNode || args.Decode(&ex.Args) != nil {
			d.errorf(args, path+".args", "expected a mapping of arguments, got %s", describe(args))
		}
	}
}

// decode fills v from n. size marks integer fields that also accept sizes
// such as "64m" (struct tag `config:"size"`).
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, size bool) {
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.errorf(n, path, "document expands to more than %d nodes (aliases?)", maxNodes)
		}
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	d.nodes[path] = n
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // unset: keep the zero value so defaults apply
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}

	switch {
	case v.Type() == exampleType:
		d.example(n, v.Addr().Interface().(*Example), path)
	case v.Type() == durationType:
		dur, err := time.ParseDuration(n.Value)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || err != nil {
			d.errorf(n, path, "%s is not a duration (e.g. 30s, 10m)", describe(n))
			return
		}
		v.SetInt(int64(dur))
	case v.Kind() == reflect.Struct:
		d.structure(n, v, path)
	case v.Kind() == reflect.Map:
		d.mapping(n, v, path)
	case v.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i), size)
		}
		v.Set(s)
	case v.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "expected a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case v.Kind() == reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.errorf(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case v.CanInt():
		var i int64
		var err error
		switch {
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int":
			err = n.Decode(&i)
		case size && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
			i, err = parseSize(n.Value)
		default:
			err = fmt.Errorf("not an integer")
		}
		switch {
		case err != nil && size:
			d.errorf(n, path, "%s is not a size (e.g. 512m, 2g)", describe(n))
		case err != nil:
			d.errorf(n, path, "%s is not an integer", describe(n))
		case v.OverflowInt(i):
			d.errorf(n, path, "%s is too large", describe(n))
		default:
			v.SetInt(i)
		}
	case v.Kind() == reflect.Float64:
		var f float64
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			d.errorf(n, path, "%s is not a number", describe(n))
			return
		}
		v.SetFloat(f)
	default:
		// Only reachable if types.go gains a field type this decoder does not know.
		d.errorf(n, path, "internal error: no decoding for %s", v.Type())
	}
}

// structure decodes a mapping into a struct by the fields' yaml tags.
func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	t := v.Type()
	var known []string
	fields := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			fields[name] = i
			known = append(known, name)
		}
	}
	d.pairs(n, path, func(key, val *yaml.Node) {
		i, ok := fields[key.Value]
		if !ok {
			d.errorf(key, join(path, key.Value), "unknown field (known: %s)", strings.Join(known, ", "))
			return
		}
		f := t.Field(i)
		d.decode(val, v.Field(i), join(path, key.Value), f.Tag.Get("config") == "size")
	})
	switch r := v.Addr().Interface().(type) {
	case *Rule:
		r.Line = n.Line
	case *LabelRule:
		r.Line = n.Line
	}
}

// mapping decodes a mapping into a map keyed by string.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	d.pairs(n, path, func(key, val *yaml.Node) {
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, join(path, key.Value), false)
		v.SetMapIndex(reflect.ValueOf(key.Value), elem)
	})
}

// pairs calls fn for each key/value of a mapping whose key is a plain
// string, reporting other keys and duplicates.
func (d *decoder) pairs(n *yaml.Node, path string, fn func(key, val *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Kind == yaml.AliasNode && key.Alias != nil {
			key = key.Alias
		}
		if key.Kind != yaml.ScalarNode {
			d.errorf(key, path, "keys must be plain names, got %s", describe(key))
			continue
		}
		if key.Value == "<<" && key.ShortTag() == "!!merge" {
			d.errorf(key, path, "merge keys (<<) are not supported; shared settings go under defaults")
			continue
		}
		if line, dup := seen[key.Value]; dup {
			d.errorf(key, join(path, key.Value), "defined twice (first at line %d)", line)
			continue
		}
		seen[key.Value] = key.Line
		fn(key, val)
	}
}

var plainKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

// join appends a key to a field path, quoting keys that would make the path
// ambiguous.
func join(path, key string) string {
	if !plainKey().MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe names a node's value for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return strconv.Quote(v)
	}
	return "nothing"
}
