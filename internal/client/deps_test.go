package client

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

const module = "github.com/toolgate/toolgate"

// inSandbox are the binaries that run inside every sandbox.
var inSandbox = []string{module + "/cmd/toolgate-client", module + "/cmd/toolgate-launch"}

// sandboxSide is everything of ours they may link: the sandbox's own code
// and the protocol leaf. A whitelist, so a new package is refused until
// someone decides it belongs in a sandbox.
var sandboxSide = []string{
	module + "/cmd/toolgate-client",
	module + "/cmd/toolgate-launch",
	module + "/internal/client",
	module + "/internal/launcher",
	module + "/internal/proto",
	module + "/internal/hooks", // the hook client's half: input, answers, spool
}

// The in-sandbox binaries link only sandbox-side packages and the standard
// library: not the gateway's servers, the egress guard, the Docker backend,
// nor any third-party module (and so no cgo from one).
func TestInSandboxDeps(t *testing.T) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Standard,Imports"}, inSandbox...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	bad, err := outsideSandbox(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("an in-sandbox binary links %s", b)
	}
}

// outsideSandbox reads `go list -deps -json` and names every package not on
// the whitelist, with a package that imports it.
func outsideSandbox(r io.Reader) ([]string, error) {
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
		if p.Standard || slices.Contains(sandboxSide, p.ImportPath) {
			continue
		}
		msg := p.ImportPath
		for _, q := range pkgs {
			if slices.Contains(q.Imports, p.ImportPath) {
				msg += " (imported by " + q.ImportPath + ")"
				break
			}
		}
		if !strings.HasPrefix(p.ImportPath, module+"/") {
			msg += ": not our code"
		}
		bad = append(bad, msg)
	}
	return bad, nil
}

// The check itself: a host-side package, or a third-party one, is named
// with what pulled it in; the whitelisted ones and the standard library pass.
func TestOutsideSandboxNamesOffenders(t *testing.T) {
	list := `{"ImportPath":"net/http","Standard":true}
{"ImportPath":"` + module + `/internal/proto"}
{"ImportPath":"` + module + `/internal/egress","Imports":["net/http"]}
{"ImportPath":"example.com/x"}
{"ImportPath":"` + module + `/internal/client","Imports":["` + module + `/internal/proto","` + module + `/internal/egress","example.com/x"]}
`
	bad, err := outsideSandbox(strings.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		module + "/internal/egress (imported by " + module + "/internal/client)",
		"example.com/x (imported by " + module + "/internal/client): not our code",
	}
	if !slices.Equal(bad, want) {
		t.Errorf("offenders %q, want %q", bad, want)
	}
	if _, err := outsideSandbox(strings.NewReader("")); err == nil {
		t.Error("an empty listing passed")
	}
}
