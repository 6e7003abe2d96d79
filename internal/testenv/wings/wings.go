// Package wings states what each wing of the tree may import, and why:
// the guest side (internal/guest), the protocol between the sides
// (internal/proto), the host side (internal/host), the thin CLI
// (internal/cli) and the small tools any of them use (internal/lib). Its
// test checks every package of the module against the rules; a rule
// broken names the importer, the import and the rule's reason.
package wings

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A Rule constrains the imports of ours made by the packages under From:
// each must be under one of May, and none under MayNot. Paths are relative
// to the module; "x" covers x and everything under it.
type Rule struct {
	From   string
	May    []string // nil: anything of ours not in MayNot
	MayNot []string
	Except []string // importers under From the rule does not bind
	// TestSupport: nor does it bind the packages that exist for tests
	// (sandboxtest, systemtest, egresstest…: a name ending in "test").
	TestSupport bool
	Why         string
}

// Rules are the tree's wings and what each may reach.
var Rules = []Rule{
	{From: "internal/proto", May: []string{"internal/proto"},
		Why: "the protocol leaf holds every shape that crosses a process boundary; both sides import it, so it imports neither"},
	{From: "internal/lib", May: []string{},
		Why: "the small tools know nothing of toolgate, so any wing may use them"},
	{From: "internal/guest", May: []string{"internal/guest", "internal/proto", "internal/lib"},
		Why: "the guest side runs in every sandbox: it speaks the protocol and links no host code"},
	{From: "internal/cli", May: []string{"internal/cli", "internal/proto", "internal/lib"},
		Why: "the thin CLI reaches a gateway only over the admin API, and starts in a millisecond"},
	{From: "internal/host", MayNot: []string{"internal/guest"},
		Why: "the host drives sandboxes over the protocol, never by calling the guest's code"},
	{From: "internal/host", MayNot: []string{"internal/cli"},
		Except: []string{"internal/host/gatewaycmd", "internal/host/systemtest"},
		Why:    "the host serves the CLI over the admin API; only the gateway binary, which also holds the client commands, and the system tests, which drive a gateway as the CLI does, import it"},
	{From: "internal/host/gateway", May: []string{"internal/host/gateway", "internal/proto"},
		Why: "the core: every door, backend and tool depends on it, and it on nothing but the protocol"},
	{From: "internal", MayNot: []string{"internal/testenv"}, Except: []string{"internal/testenv"}, TestSupport: true,
		Why: "test fixtures never enter a binary: only tests and the packages for tests use them"},
	{From: "cmd", MayNot: []string{"internal/host/daemon", "internal/host/gateway"},
		Why: "a command is thin: it calls its wing's entry (cli, guest, host/gatewaycmd), which wires the rest"},
}

// Broken lists every import in graph (importer → its imports, paths
// relative to the module) that breaks a rule, with the rule's reason.
func Broken(graph map[string][]string, rules []Rule) []string {
	var out []string
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		for _, r := range rules {
			if !under(pkg, r.From) || slices.ContainsFunc(r.Except, func(e string) bool { return under(pkg, e) }) {
				continue
			}
			if r.TestSupport && testSupport(pkg) {
				continue
			}
			for _, imp := range graph[pkg] {
				allowed := r.May == nil || slices.ContainsFunc(r.May, func(m string) bool { return under(imp, m) })
				refused := slices.ContainsFunc(r.MayNot, func(m string) bool { return under(imp, m) })
				if !allowed || refused {
					out = append(out, fmt.Sprintf("%s imports %s: %s", pkg, imp, r.Why))
				}
			}
		}
	}
	return out
}

// testSupport reports whether pkg exists for tests (sandboxtest,
// systemtest, egresstest…): it may use the fixtures.
func testSupport(pkg string) bool {
	return strings.HasSuffix(pkg[strings.LastIndexByte(pkg, '/')+1:], "test")
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
