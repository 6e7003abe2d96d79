package gatewaycmd

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/toolgate/toolgate/internal/cli"
)

// toolgate's tree lists the same commands with the same help as
// toolgate-gateway's, at every level: each of its commands is either a
// stand-in for toolgate-gateway's (it parses nothing of its own and has no
// subcommands) or the same command (the same flags and subcommands; audit's
// show and query, which ask the running gateway).
func TestThinTreeListsEveryCommand(t *testing.T) {
	sameTree(t, cli.NewRootCmd(), NewRootCmd())
}

func sameTree(t *testing.T, thin, full *cobra.Command) {
	t.Helper()
	want := map[string]*cobra.Command{}
	for _, c := range full.Commands() {
		want[c.Name()] = c
	}
	for _, c := range thin.Commands() {
		f, ok := want[c.Name()]
		if !ok {
			t.Errorf("toolgate lists %s, which toolgate-gateway does not have", c.CommandPath())
			continue
		}
		delete(want, c.Name())
		if c.Short != f.Short {
			t.Errorf("toolgate lists %s as %q, toolgate-gateway as %q", c.CommandPath(), c.Short, f.Short)
		}
		if c.DisableFlagParsing {
			if c.HasSubCommands() {
				t.Errorf("toolgate's %s stands in for toolgate-gateway's and has subcommands of its own", c.CommandPath())
			}
			continue
		}
		if a, b := flagNames(c), flagNames(f); !slices.Equal(a, b) {
			t.Errorf("toolgate's %s takes %v, toolgate-gateway's %v", c.CommandPath(), a, b)
		}
		sameTree(t, c, f)
	}
	for _, f := range want {
		t.Errorf("toolgate does not list %s", f.CommandPath())
	}
}

func flagNames(c *cobra.Command) []string {
	var names []string
	c.LocalFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name+" "+f.Usage) })
	return names
}
