package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Module is this repository's module path.
const Module = "github.com/toolgate/toolgate"

// LinksBeyond lists every package the binaries pkgs link that is neither
// the standard library nor in allowed, each with a package that imports it:
// how a test keeps a binary from growing into what it must not link.
func LinksBeyond(t testing.TB, allowed []string, pkgs ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Standard,Imports"}, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	bad, err := Beyond(bytes.NewReader(out), allowed)
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// Beyond reads `go list -deps -json` and names every non-standard package
// not in allowed, with a package that imports it; one from outside this
// module is said to be so.
func Beyond(r io.Reader, allowed []string) ([]string, error) {
	type pkg struct {
		ImportPath string
		Standard   bool
		Imports    []string
	}
	var pkgs []pkg
	dec := json.NewDecoder(r)
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		return nil, errors.New("go list listed no packages")
	}
	var bad []string
	for _, p := range pkgs {
		if p.Standard || strings.HasPrefix(p.ImportPath, "vendor/") || slices.Contains(allowed, p.ImportPath) {
			continue
		}
		msg := p.ImportPath
		for _, q := range pkgs {
			if slices.Contains(q.Imports, p.ImportPath) {
				msg += " (imported by " + q.ImportPath + ")"
				break
			}
		}
		if !strings.HasPrefix(p.ImportPath, Module+"/") {
			msg += ": not our code"
		}
		bad = append(bad, msg)
	}
	return bad, nil
}
