package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Load reads, validates and completes the configuration at path
// (HOME/config.yaml when path is empty). Invalid files yield Errors, every
// problem at once; a returned Config has all defaults applied.
func Load(home, path string) (*Config, error) {
	if path == "" {
		path = filepath.Join(home, "config.yaml")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(home, path, data)
}

// Parse is Load on bytes already read; name is the file named in errors.
func Parse(home, name string, data []byte) (*Config, error) {
	if home != "" {
		if abs, err := filepath.Abs(home); err == nil {
			home = abs
		}
	}
	sum := sha256.Sum256(data)
	cfg := &Config{Home: home, Path: name, Digest: hex.EncodeToString(sum[:])}
	d := &decoder{file: name, nodes: map[string]*yaml.Node{}, failed: map[string]bool{}, budget: maxNodes}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		// An empty file is a configuration without agents.
	case err != nil:
		return nil, Errors{d.syntax(err)}
	default:
		var next yaml.Node
		if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
			if err != nil {
				return nil, Errors{d.syntax(err)}
			}
			return nil, Errors{{File: name, Line: next.Line, Msg: "only one YAML document is allowed"}}
		}
		root := &doc
		if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
			root = doc.Content[0]
		}
		d.decode(root, reflect.ValueOf(cfg).Elem(), "", false)
	}
	d.finish(cfg)
	if len(d.errs) > 0 {
		d.errs.Sort()
		return nil, d.errs
	}
	return cfg, nil
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// syntax turns a YAML parser error into an Error with its line.
func (d *decoder) syntax(err error) *Error {
	e := &Error{File: d.file, Msg: err.Error()}
	if m := yamlLine().FindStringSubmatch(e.Msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = m[2]
	}
	return e
}
