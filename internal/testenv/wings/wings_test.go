package wings

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv/probe"
)

// The tree keeps its wings: every package of the module, every import of
// ours (tests' imports are free: a test may reach what it checks).
func TestTreeKeepsItsWings(t *testing.T) {
	touchSources(t)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, probe.Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		var ours []string
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, probe.Module+"/"); ok {
				ours = append(ours, rel)
			}
		}
		graph[strings.TrimPrefix(f[0], probe.Module+"/")] = ours
	}
	if len(graph) < 50 || len(graph["internal/host/daemon"]) == 0 {
		t.Fatalf("go list gave %d packages: not the module's tree", len(graph))
	}
	for _, b := range Broken(graph, Rules) {
		t.Error(b)
	}
}

// Each rule fails when broken, and names the importer, the import and
// its reason; the exceptions a rule states pass.
func TestBrokenNamesTheRule(t *testing.T) {
	graph := map[string][]string{
		"internal/proto/api":             {"internal/proto", "internal/host/gateway"},
		"internal/lib/sse":               {"internal/proto"},
		"internal/guest":                 {"internal/proto", "internal/lib/sse", "internal/host/sandbox"},
		"internal/cli":                   {"internal/cli/adminclient", "internal/host/config"},
		"internal/host/door/mcp":         {"internal/host/gateway", "internal/guest", "internal/cli/adminclient"},
		"internal/host/gatewaycmd":       {"internal/cli", "internal/host/daemon"},
		"internal/host/systemtest":       {"internal/cli/adminclient", "internal/testenv"},
		"internal/host/sandbox/kube":     {"internal/testenv/probe"},
		"internal/host/sandbox/fake":     {"internal/host/gateway"},
		"internal/host/gateway":          {"internal/proto/api", "internal/host/audit"},
		"internal/host/sandbox/sandtest": {"internal/testenv"},
		"cmd/toolgate-gateway":           {"internal/host/gatewaycmd", "internal/host/daemon"},
	}
	got := Broken(graph, Rules)
	want := []string{
		"cmd/toolgate-gateway imports internal/host/daemon",
		"internal/cli imports internal/host/config",
		"internal/guest imports internal/host/sandbox",
		"internal/host/door/mcp imports internal/guest",
		"internal/host/door/mcp imports internal/cli/adminclient",
		"internal/host/gateway imports internal/host/audit",
		"internal/host/sandbox/kube imports internal/testenv/probe",
		"internal/lib/sse imports internal/proto",
		"internal/proto/api imports internal/host/gateway",
	}
	if len(got) != len(want) {
		t.Fatalf("broken:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for _, w := range want {
		i := slices.IndexFunc(got, func(g string) bool { return strings.HasPrefix(g, w+": ") && len(g) > len(w)+10 })
		if i < 0 {
			t.Errorf("not named with its reason: %s\n(got %q)", w, got)
		}
	}
}

// touchSources stats every Go file of the module, so that go test's cache
// knows this test's answer depends on them (it cannot see into go list).
func touchSources(t *testing.T) {
	err := filepath.WalkDir("../../..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case strings.HasSuffix(path, ".go"):
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
