package cli

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

// toolgateLinks is everything beyond the standard library that the toolgate
// binary may link. Its client commands start in about a millisecond
// because it links nothing with costly initialisers (CEL, protobuf, the
// Docker and Kubernetes clients, the MCP SDK, SQLite, pgx, Prometheus,
// YAML): commands that need them belong in gatewaycmd.
var toolgateLinks = []string{
	"github.com/spf13/cobra",
	"github.com/spf13/pflag",
	"github.com/toolgate/toolgate/cmd/toolgate",
	"github.com/toolgate/toolgate/internal/adminapi",
	"github.com/toolgate/toolgate/internal/approval",
	"github.com/toolgate/toolgate/internal/auth",
	"github.com/toolgate/toolgate/internal/cli",
	"github.com/toolgate/toolgate/internal/gateway",
	"github.com/toolgate/toolgate/internal/hooks",
	"github.com/toolgate/toolgate/internal/lockedfile",
	"github.com/toolgate/toolgate/internal/proto",
	"github.com/toolgate/toolgate/internal/wire",
}

// TestToolgateDeps fails naming any other package that enters the toolgate
// binary, and what imported it.
func TestToolgateDeps(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports", "github.com/toolgate/toolgate/cmd/toolgate")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	bad, err := beyond(bytes.NewReader(out), toolgateLinks)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("toolgate links %s: a command that needs it belongs in gatewaycmd", b)
	}
}

// beyond reads `go list -deps -json` and names every non-standard package
// not in allowed, with a package that imports it.
func beyond(r io.Reader, allowed []string) ([]string, error) {
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
		bad = append(bad, msg)
	}
	return bad, nil
}

// beyond catches a package that only an allowed one imports.
func TestBeyondNamesTheImporter(t *testing.T) {
	in := `{"ImportPath":"fmt","Standard":true}
{"ImportPath":"example.com/heavy"}
{"ImportPath":"example.com/ok","Imports":["fmt","example.com/heavy"]}`
	bad, err := beyond(strings.NewReader(in), []string{"example.com/ok"})
	if err != nil || len(bad) != 1 || bad[0] != "example.com/heavy (imported by example.com/ok)" {
		t.Fatalf("%q %v", bad, err)
	}
	if _, err := beyond(strings.NewReader(""), nil); err == nil {
		t.Fatal("an empty listing passed")
	}
}
